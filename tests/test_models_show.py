"""`lts models --show`: layer kinds, each op group's weight format, the KV dtype and the KV bytes
a request holds at the contexts asked for (issue 22, item 5)."""
import json

from click.testing import CliRunner

from lts.cli import cli


def show(*args):
    r = CliRunner().invoke(cli, ["models", "--show", *args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def test_gpt_oss_kinds_formats_and_kv_by_hand():
    d = show("gpt-oss-120b", "--context", "100", "--context", "4096")
    assert d["layer_kinds"] == {"sliding_attention": 18, "full_attention": 18}
    assert d["formats"]["experts"] == "mxfp4" and d["formats"]["attention"] == "bf16"
    assert d["kv_cache"] == "bf16"
    # 8 kv heads x 64 x (K + V) x 2 bytes = 2,048 bytes per token per layer; the 18 windowed
    # layers hold min(context, 128) tokens, the 18 full ones the whole context
    per = 8 * 64 * 2 * 2
    assert d["kv_per_request"] == [
        {"context": 100, "bytes": float(36 * 100 * per)},
        {"context": 4096, "bytes": float((18 * 128 + 18 * 4096) * per)}]


def test_mla_holds_one_latent():
    d = show("deepseek-v3", "--context", "1000")
    assert d["layer_kinds"] == {"full_attention": 61}
    # (kv_lora_rank 512 + rope 64) x 2 bytes x 61 layers per token
    assert d["kv_per_request"] == [{"context": 1000, "bytes": float(1000 * 576 * 2 * 61)}]


def test_text_table_names_the_kinds_and_the_kv():
    r = CliRunner().invoke(cli, ["models", "--show", "gpt-oss-120b", "--no-color"])
    assert r.exit_code == 0
    text = " ".join(r.output.split())          # the table wraps long values
    assert "18 sliding_attention, 18 full_attention" in text
    assert "4.504 GiB at 131,072 tokens" in text


def test_bad_context_exits_2():
    r = CliRunner().invoke(cli, ["models", "--show", "gpt-oss-120b", "--context", "0"])
    assert r.exit_code == 2 and "--context" in r.output
