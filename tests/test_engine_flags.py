"""Every flag lts emits is one the engine release it names accepts.

tests/data/engine_flags/ holds, per engine, the flags its current release's command line
registers (and for TensorRT-LLM the YAML keys of the LLM API options and of the disaggregated
server config), read from the release's source by scripts/engine_flags.py; the file names carry
the versions in ``Engine.flags_version``. Here lts writes commands for a spread of strategies (single and
multi-node, dense and MoE, tp/ep/pp, attention DP, expert parallel, fp8, the serve phase, the
two-pool deployment) and every ``--flag`` (and YAML key) in them must be in the list.
"""
import shlex
from pathlib import Path

import pytest

from lts.engines import ENGINES, REAL_ENGINES
from lts.launch import emit
from lts.search.disagg import disaggregate
from lts.launch.emit_disagg import launch_disagg
from lts.search.problems import ServeProblem
from lts.search.problems import Problem
from lts.specs import load_model, load_topology
from lts.specs.strategy import parse_strategy
from lts.specs.workload import Workload

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "engine_flags"
FILES = {name: f"{name}-{ENGINES[name].flags_version}.txt" for name in REAL_ENGINES}
TRTLLM_YAML = f"trtllm-{ENGINES['trtllm'].flags_version}-yaml.txt"
# the program and its subcommand -> (engine, section of the engine's list)
PROGRAMS = {("vllm", "serve"): ("vllm", ""), ("-m", "sglang.launch_server"): ("sglang", ""),
            ("trtllm-serve", "disaggregated"): ("trtllm", "disaggregated"),
            ("trtllm-serve",): ("trtllm", "serve")}


def read_list(name: str) -> dict:
    """{section: names} of one list file ('' before the first [section])."""
    out, section = {"": set()}, ""
    for line in (DATA / name).read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            out.setdefault(section, set())
        else:
            out[section].add(line)
    return out


LISTS = {engine: read_list(name) for engine, name in FILES.items()}
YAML_KEYS = read_list(TRTLLM_YAML)


def engine_flags(command: str) -> list:
    """[(engine, section, flag)] for each engine invocation in a shell command line: the option
    words after ``vllm serve``, ``python -m sglang.launch_server``, ``trtllm-serve`` (up to the
    next ``&&``/``;``/``|``); what other programs (srun, ray, printf, routers) take is not an
    engine's."""
    words = shlex.split(command)
    out, current = [], None
    for i, w in enumerate(words):
        if w in ("&&", ";", "|", "||"):
            current = None
            continue
        if w == "trtllm-serve":
            sub = words[i + 1] if i + 1 < len(words) else ""
            current = PROGRAMS[("trtllm-serve", "disaggregated")] if sub == "disaggregated" \
                else PROGRAMS[("trtllm-serve",)]
            continue
        pair = tuple(words[i - 1:i + 1]) if i else ()
        if pair in PROGRAMS:
            current = PROGRAMS[pair]
            continue
        if current and w.startswith("-") and w not in ("-", "--"):
            out.append((*current, w.split("=", 1)[0]))
    return out


def unknown_flags(command: str) -> list:
    """The flags of ``command`` its engine's release does not accept, or accepts only as
    deprecated (its [deprecated] section)."""
    out = []
    for engine, section, flag in engine_flags(command):
        if flag in LISTS[engine].get("deprecated", ()):
            out.append(f"{engine} {flag} (deprecated)")
        elif flag not in LISTS[engine].get(section, set()):
            out.append(f"{engine} {flag}")
    return out


def yaml_keys(command: str):
    """(file, dotted keys) of a ``printf "..." > FILE`` that writes a YAML file, else None."""
    words = shlex.split(command)
    if not words or words[0] != "printf" or ">" not in words:
        return None
    text = words[1].replace("\\n", "\n")
    keys, stack = [], []
    for line in text.splitlines():
        if not line.strip() or line.strip().startswith("- "):
            continue
        indent = len(line) - len(line.lstrip())
        key = line.strip().split(":", 1)[0]
        stack = [(i, k) for i, k in stack if i < indent]
        keys.append(".".join([k for _, k in stack] + [key]))
        stack.append((indent, key))
    return words[words.index(">") + 1], keys


def unknown_yaml_keys(path: str, keys: list) -> list:
    """Keys TensorRT-LLM rejects: an LLM API options file (--extra_llm_api_options) takes the
    LLM API keys; the disaggregated server's file (-c) its own at the top and in the servers'
    sections, every other key being passed on to the servers as an LLM API option."""
    api = YAML_KEYS["llm_api"]
    if path != "lts-disagg.yaml":
        return [k for k in keys if k not in api]
    bad = []
    for key in keys:
        head, _, rest = key.partition(".")
        if head in ("context_servers", "generation_servers") and rest:
            ok = rest.split(".")[0] in YAML_KEYS["disaggregated.SERVERS"] or rest in api
        else:
            ok = key in YAML_KEYS["disaggregated"] or key in api
        if not ok:
            bad.append(key)
    return bad


# ----------------------------------------------------------------------------------------------
# the lists themselves

def test_lists_name_the_versions_lts_emits_for():
    for engine, name in {**FILES, "trtllm-yaml": TRTLLM_YAML}.items():
        header = (DATA / name).read_text(encoding="utf-8").splitlines()[0]
        version = ENGINES[engine.split("-")[0]].flags_version
        assert header.startswith("# ") and f" {version}: " in header, (name, header)
    assert {"--tensor-parallel-size", "--data-parallel-size", "--enable-expert-parallel"} <= \
        LISTS["vllm"][""]
    assert {"--tp-size", "--attn-dp-size", "--ep-size", "--enable-dp-lm-head"} <= \
        LISTS["sglang"][""]
    assert {"--tp_size", "--ep_size", "--extra_llm_api_options"} <= LISTS["trtllm"]["serve"]
    assert "cache_transceiver_config.max_tokens_in_buffer" in YAML_KEYS["llm_api"]
    assert "cache_transceiver_config.max_num_tokens" not in YAML_KEYS["llm_api"]


def test_the_check_catches_an_unknown_flag():
    assert unknown_flags("VLLM_X=1 vllm serve m --tensor-parallel-size 2 --bogus-flag 3") == \
        ["vllm --bogus-flag"]
    assert unknown_flags("python -m sglang.launch_server --model-path m --tp 8 --dp 2 "
                         "--enable-dp-attention") == \
        ["sglang --tp", "sglang --dp",          # abbreviations of --tp-size/--dp-size: not exact
         "sglang --enable-dp-attention (deprecated)"]         # for --attn-dp-size in 0.5.23
    assert unknown_flags("srun -N 2 --mpi=pmix trtllm-llmapi-launch trtllm-serve m --tp_size 8 "
                         "--max_num_tokens 1 --bogus") == ["trtllm --bogus"]
    assert unknown_flags('printf "x" > f && trtllm-serve disaggregated -c f --tp_size 2') == \
        ["trtllm --tp_size"]
    assert unknown_flags("ray start --head --port=6379") == []
    path, keys = yaml_keys('printf "cache_transceiver_config:\\n  max_num_tokens: 8\\n'
                           'enable_attention_dp: true\\n" > lts-ctx.yaml')
    assert unknown_yaml_keys(path, keys) == ["cache_transceiver_config.max_num_tokens"]


# ----------------------------------------------------------------------------------------------
# what lts emits

# (model, gpus, strategy, precision): dense and MoE, single and multi-node, tp/ep/pp, attention
# DP, expert parallel, fp8
DPA = ("{},embedding=none,attn_norm=0,qkv=none,scores=none,context=none,out_proj=none,"
       "ffn_norm=0,final_norm=0,lm_head=none")
CASES = [
    ("llama3.1-8b", 8, "tp=4,batch=32", None),
    ("llama3.1-70b", 8, "tp=8,batch=64", "fp8"),
    ("llama3.1-70b", 16, "tp=8,pp=2,batch=64", None),
    ("llama3.1-405b", 32, "tp=8,pp=4,batch=64", "fp8"),
    ("mixtral-8x7b", 8, "tp=8,batch=256", None),
    ("mixtral-8x7b", 8, "tp=8,batch=256,ffn1=experts,ffn2=experts", None),
    ("mixtral-8x7b", 8, "tp=2,ep=4,batch=256,ffn1=experts,ffn2=experts", "fp8"),
    ("mixtral-8x7b", 8, "tp=2,ep=4,batch=128", None),
    ("mixtral-8x7b", 8, "tp=1,ep=8,batch=64", None),
    ("mixtral-8x7b", 8, "tp=2,ep=2,pp=2,batch=64", None),
    ("mixtral-8x7b", 32, "tp=16,ep=2,batch=64,ffn1=experts,ffn2=experts", None),
    ("deepseek-v3", 16, "tp=1,ep=16,batch=256", "fp8"),
    ("deepseek-v3", 16, "tp=2,ep=8,batch=256", None),
    ("deepseek-v3", 32, "tp=4,ep=8,batch=256,ffn1=experts,ffn2=experts", None),
    ("qwen3-235b-a22b", 16, "tp=8,ep=2,batch=128,ffn1=experts,ffn2=experts", None),
    # data-parallel attention with tensor-parallel experts (strategy.DP_ATTENTION)
    ("mixtral-8x7b", 8, DPA.format("tp=8,batch=128"), None),
    ("deepseek-v3", 16, DPA.format("tp=8,ep=2,batch=256"), None),
    ("deepseek-v3", 32, DPA.format("tp=16,batch=256"), "fp8"),
]


def _problem(model, gpus, precision):
    return Problem(load_model(model, precision), load_topology("h100_dgx"),
                   Workload(gpus=gpus))


def _check(commands) -> list:
    """Every unknown flag and YAML key in a list of (role, command)."""
    bad = []
    for role, cmd in commands:
        bad += [f"{role}: {f}" for f in unknown_flags(cmd)]
        written = yaml_keys(cmd)
        if written:
            bad += [f"{role}: {written[0]} {k}" for k in unknown_yaml_keys(*written)]
    return bad


@pytest.mark.parametrize("engine", REAL_ENGINES)
def test_every_single_instance_flag_is_accepted(engine):
    emitted = 0
    for model, gpus, strategy, precision in CASES:
        p = _problem(model, gpus, precision)
        lau = emit.launch(engine, p, parse_strategy(strategy, p.model.is_moe), model, precision)
        assert lau.commands, (model, strategy, lau.notes)
        assert _check(lau.commands) == [], (model, strategy)
        emitted += len(engine_flags(" ; ".join(c for _, c in lau.commands)))
    assert emitted > 4 * len(CASES)


# (strategy, the engine's expert-parallel size for it: vLLM runs ep > 1 as expert parallelism
# over all DP x TP GPUs, the others as written): whole experts over every GPU (tp=1 ep>1), over
# the tp group, and tensor-parallel experts with data-parallel attention
EPLB_CASES = [("tp=1,ep=24,batch=512", 24), ("tp=8,ep=3,batch=512,ffn1=experts,ffn2=experts", 24),
              (DPA.format("tp=8,ep=3,batch=512"), 3)]
EPLB_FLAGS = {"vllm": ("--enable-eplb", "--eplb-config"),
              "sglang": ("--enable-eplb", "--ep-num-redundant-experts"),
              "trtllm": ("load_balancer:", "num_slots: 288")}


def _eplb_launch(engine, strategy):
    from lts.specs import with_expert_placement
    m = with_expert_placement(load_model("deepseek-v3"), 32)
    p = Problem(m, load_topology("gb200_nvl72"), Workload(gpus=72))
    return emit.launch(engine, p, parse_strategy(strategy, True), "deepseek-v3", None)


@pytest.mark.parametrize("engine", REAL_ENGINES)
@pytest.mark.parametrize("strategy,ep_size", EPLB_CASES)
def test_redundant_experts_flags_are_accepted(engine, strategy, ep_size):
    """--redundant-experts 32 (288 expert copies of DeepSeek-V3): the engine's load-balancer
    flags, each one it accepts, and the copies per expert-parallel rank in the notes."""
    lau = _eplb_launch(engine, strategy)
    assert _check(lau.commands) == [], lau.commands
    text = " ".join(c for _, c in lau.commands)
    for flag in EPLB_FLAGS[engine]:
        assert flag in text, (flag, text)
    if engine == "vllm":
        assert "--eplb-config '{\"num_redundant_experts\":32}'" in text
    if engine == "sglang":
        assert "--ep-num-redundant-experts 32" in text
    size = ep_size if engine != "vllm" else 24
    assert any(f"288 expert copies over {size} expert-parallel ranks, {288 // size} on each"
               in n for n in lau.notes), lau.notes


@pytest.mark.parametrize("engine", REAL_ENGINES)
def test_redundant_experts_without_expert_parallelism_are_not_written(engine):
    """Data-parallel attention with tensor-parallel experts at ep 1 (every engine runs it): no
    expert-parallel ranks to balance over, so no load-balancer flag, and a note that says so."""
    lau = _eplb_launch(engine, DPA.format("tp=8,batch=512"))
    text = " ".join(c for _, c in lau.commands)
    assert "eplb" not in text and "load_balancer" not in text and "redundant" not in text
    assert any(n.startswith("EPLB with 32 redundant experts not written") for n in lau.notes)


@pytest.mark.parametrize("engine", REAL_ENGINES)
def test_serve_phase_flags_are_accepted(engine, tmp_path):
    """The serve phase's commands (TensorRT-LLM's token budget and chunked prefill) with a model
    given as a config file that is not named config.json, in a folder with weights."""
    p = ServeProblem(load_model("mixtral-8x7b"), load_topology("h100_dgx"), 16384, 512, gpus=8)
    row = parse_strategy("tp=8,batch=32", True)
    lau = emit.launch(engine, p, row, "models/../models/mixtral-8x7b.toml")
    assert _check(lau.commands) == []
    (tmp_path / "model.safetensors").write_bytes(b"")
    cmds, _ = emit.commands(engine, p.model, p.topo, p.work, row,
                            str(tmp_path / "Qwen3-8B_config.json"), serve=p)
    assert _check(cmds) == []
    text = " ".join(c for _, c in cmds)
    assert ".json" not in text and f" {tmp_path} " in f" {text} ".replace("--model-path ", "")
    if engine == "trtllm":
        assert "--enable_chunked_prefill" in text


@pytest.mark.parametrize("engine", REAL_ENGINES)
@pytest.mark.parametrize("spec", [("mtp", None), ("eagle", 0.7), ("draft:llama3.1-8b", 0.7)])
def test_speculative_decoding_and_prefix_caching_flags_are_accepted(engine, spec):
    """--spec (MTP, EAGLE-3, a draft model) and --prefix-hit: the engine's own flags (vLLM's
    --speculative-config, SGLang's --speculative-*, TensorRT-LLM's speculative_config YAML)."""
    from lts.serving.prefix import PrefixCache
    from lts.serving.spec import speculation
    method, a = spec
    target = "deepseek-v3" if method == "mtp" else "llama3.1-70b"
    m = load_model(target)
    name = method.partition(":")[2]
    s = speculation(m, method.partition(":")[0], 3, a, None, load_model(name) if name else None,
                    name)
    p = ServeProblem(m, load_topology("h100_dgx"), 4096, 512, gpus=16 if method == "mtp" else 8,
                     spec=s, prefix=PrefixCache(0.5))
    row = parse_strategy("tp=8,ep=2,batch=64" if method == "mtp" else "tp=8,batch=64", True)
    cmds, notes = emit.commands(engine, p.model, p.topo, p.work, row, target, serve=p)
    assert _check(cmds) == [], cmds
    text = " ".join(c for _, c in cmds)
    assert {"vllm": "--speculative-config", "sglang": "--speculative-algorithm",
            "trtllm": "speculative_config"}[engine] in text
    assert any("prefix caching" in n for n in notes)
    if name:
        assert "meta-llama/Llama-3.1-8B" in text        # the draft as the engine loads it


@pytest.fixture(scope="module")
def deployments():
    """Two-pool deployments: Mixtral on one node, Llama-3.1-405B with multi-node instances."""
    out = []
    for model, gpus, tpot, ttft in (("mixtral-8x7b", 8, 30, 2000),
                                    ("llama3.1-405b", 32, 50, 5000)):
        p = ServeProblem(load_model(model), load_topology("h100_dgx"), 1024, 1024, tpot, ttft,
                         gpus=gpus)
        dg, _ = disaggregate(p)
        assert dg is not None
        out.append((model, p, dg))
    return out


@pytest.mark.parametrize("engine", REAL_ENGINES)
def test_every_two_pool_flag_and_yaml_key_is_accepted(engine, deployments):
    for model, p, dg in deployments:
        for precision in (None, "fp8"):
            dl = launch_disagg(engine, p, dg, model, precision)
            assert dl.commands
            assert _check(dl.commands) == [], (model, precision)
            if engine == "trtllm":
                written = [yaml_keys(c) for _, c in dl.commands]
                assert {w[0] for w in written if w} == {"lts-ctx.yaml", "lts-gen.yaml",
                                                        "lts-disagg.yaml"}


# ----------------------------------------------------------------------------------------------
# scripts/engine_flags.py, on a miniature of each engine's source layout

def _script():
    import importlib.util
    spec = importlib.util.spec_from_file_location("engine_flags", ROOT / "scripts" /
                                                  "engine_flags.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script_reads_flags_from_source_without_importing_it(tmp_path):
    files = {
        "vllm/engine/arg_utils.py":
            "import torch\nclass EngineArgs:\n    def add_cli_args(p):\n"
            "        g.add_argument('--tensor-parallel-size', '-tp', **kw['tensor_parallel_size'])\n"
            "        g.add_argument(\n            '--headless', action='store_true')\n",
        "vllm/entrypoints/common/cli_args.py":
            "class BaseFrontendArgs:\n    lora_modules: list = None\n"
            "class FrontendArgs(BaseFrontendArgs):\n    port: int = 8000\n    _private: int = 0\n",
        "sglang/srt/server_args.py":
            "def add_cli_args(parser):\n    parser.add_argument('--config', type=str)\n"
            "    parser.add_argument('--enable-dp-attention', action=DeprecatedStoreTrueAction)\n",
        "sglang/srt/arg_groups/fields/parallel.py":
            "class Parallel(msgspec.Struct):\n    _NS_PATH = 'parallel'\n"
            "    tp_size: A[int, Arg(help='tp', aliases=['--tensor-parallel-size'])] = 1\n"
            "    attn_dp_size: A[int, 'attention dp'] = 1\n"
            "    enable_dp_attention: A[bool, Arg(no_cli=True)] = False\n"
            "    ep_join_rank_offset: A[int, Arg(cli_name='--elastic-ep-join-rank-offset')] = 0\n"
            "    lm_a2a: A[Optional[bool], Arg(action=argparse.BooleanOptionalAction)] = None\n"
            "    plain: int = 0\n",
        "tensorrt_llm/commands/serve.py":
            "@click.command('serve')\n@click.argument('model')\n"
            "@click.option('--tensor_parallel_size', '--tp_size', type=int)\n"
            "def serve(model, tensor_parallel_size):\n    pass\n"
            "@click.command('disaggregated')\n@click.option('-c', '--config_file')\n"
            "def disaggregated(config_file):\n    pass\n"
            "@click.command('grpc')\n@click.option('--grpc_only')\ndef grpc(x):\n    pass\n",
        "tensorrt_llm/llmapi/llm_args.py":
            "class CacheTransceiverConfig(StrictBaseModel):\n"
            "    backend: Optional[str] = Field(default=None)\n"
            "    max_tokens_in_buffer: Optional[int] = None\n"
            "class BaseLlmArgs(StrictBaseModel):\n    enable_attention_dp: bool = False\n"
            "    cache_transceiver_config: Optional[CacheTransceiverConfig] = None\n"
            "    _parallel_config: object = PrivateAttr(default=None)\n"
            "class TorchLlmArgs(BaseLlmArgs):\n    disable_overlap_scheduler: bool = False\n",
        "tensorrt_llm/llmapi/disagg_utils.py":
            "def extract_disagg_cfg(hostname='localhost', port=8000, context_servers=None,\n"
            "                       **kwargs):\n    pass\n"
            "def extract_ctx_gen_cfgs(type, num_instances=1, urls=None, **kwargs):\n    pass\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    script = _script()
    assert script.vllm_flags(tmp_path) == {"--tensor-parallel-size", "-tp", "--headless",
                                           "--lora-modules", "--port"}
    flags, deprecated = script.sglang_flags(tmp_path)
    assert flags == {"--config", "--tp-size", "--tensor-parallel-size", "--attn-dp-size",
                     "--elastic-ep-join-rank-offset", "--lm-a2a", "--no-lm-a2a"}
    assert deprecated == {"--enable-dp-attention"}
    assert script.trtllm_flags(tmp_path) == {"serve": {"--tensor_parallel_size", "--tp_size"},
                                             "disaggregated": {"-c", "--config_file"}}
    keys = script.trtllm_yaml_keys(tmp_path)
    assert keys["llm_api"] == {"enable_attention_dp", "cache_transceiver_config",
                               "disable_overlap_scheduler", "cache_transceiver_config.backend",
                               "cache_transceiver_config.max_tokens_in_buffer"}
    assert keys["disaggregated"] == {"hostname", "port", "context_servers"}
    assert keys["disaggregated.SERVERS"] == {"num_instances", "urls", "router"}
    text = script.render("vllm", "9.9", {"": {"--b", "--a"}, "x": {"--c"}}, "src.py")
    assert text.splitlines()[0] == "# vllm 9.9: src.py" and text.endswith("--a\n--b\n[x]\n--c\n")


def test_the_shipped_lists_are_what_the_script_writes():
    """The generated files (vLLM, SGLang) parse back to the script's own rendering: nothing was
    edited by hand after generation."""
    script = _script()
    for engine in ("vllm", "sglang"):
        text = (DATA / FILES[engine]).read_text(encoding="utf-8")
        sections = read_list(FILES[engine])
        header = text.splitlines()[0].split(": ", 1)[1]
        rendered = script.render(engine, ENGINES[engine].flags_version,
                                 {k: v for k, v in sections.items() if k or v}, header)
        assert rendered == text
