"""Launch commands start as printed, and the deployment files hold them (issue 35).

Every emitted command is run through bash (``tests/shell_run.py``: parsed, split, and run with
each program replaced by one that prints its arguments); the Slurm script is run with Slurm's
programs replaced the same way; the Kubernetes manifests are read back with a YAML parser.
"""
import json
import re
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from lts.specs import load_topology

sys.path.insert(0, str(Path(__file__).resolve().parent))
from schema import validate_manifest  # noqa: E402
from shell_run import USER_ENV, check, expand  # noqa: E402
from test_cli import run  # noqa: E402
from test_engine_flags import unknown_flags, unknown_yaml_keys, yaml_keys  # noqa: E402

yaml = pytest.importorskip("yaml")      # the test extra installs it (pyproject.toml)

SERVE = ("--phase", "serve", "--method", "random", "--budget", "100")
CASES = {   # name -> search arguments: each engine, one and two pools, speculative decoding,
    # multi-host instances on 8-GPU hosts and on 4-GPU NVL72 trays
    "vllm-eagle": ("llama3.1-70b", "h100_dgx", "--gpus", "8", *SERVE, "--spec", "eagle", "--acceptance", "0.7",
                   "--emit", "vllm"),
    "vllm-dp-hosts": ("deepseek-v3", "gb300_nvl72", "--gpus", "16", "--method", "exact",
                      "--emit", "vllm"),
    "sglang-mtp": ("deepseek-v3", "gb300_nvl72", "--gpus", "32", *SERVE, "--spec", "mtp",
                   "--emit", "sglang"),
    "sglang-draft": ("llama3.1-70b", "h100_dgx", "--gpus", "8", *SERVE, "--spec",
                     "draft:llama3.1-8b", "--acceptance", "0.6", "--emit", "sglang"),
    "trtllm-fp8": ("llama3.1-70b", "h100_dgx", "--gpus", "16", *SERVE, "--precision", "fp8",
                   "--emit", "trtllm"),
    "trtllm-hosts": ("deepseek-v3", "gb200_nvl72", "--gpus", "32", *SERVE, "--emit",
                     "trtllm"),
}
_cache = {}


def search(name: str, *more, code: int = 0) -> dict:
    key = (name, more)
    if key not in _cache:
        r = run("search", *CASES[name], *more, "--json")
        assert r.exit_code == code, r.output
        _cache[key] = json.loads(r.stdout) if code == 0 else r.output
    return _cache[key]


def commands(d: dict) -> list:
    return [c for k in ("emit", "emit_disagg") if k in d for c in d[k]["commands"]]


@pytest.mark.parametrize("name", CASES)
def test_every_command_starts_as_printed(name):
    """bash parses each command, passes its program the words shlex reads with the variables
    the notes name expanded, and every flag is one the engine release accepts."""
    cmds = commands(search(name))
    assert cmds
    for c in cmds:
        assert check(c["command"]) == [], c["command"]
        assert unknown_flags(c["command"]) == [], c["command"]


def test_eagle3_draft_expands_inside_the_json():
    """vLLM's --speculative-config is JSON: the draft's $EAGLE3_DRAFT must reach it expanded
    (it sat inside single quotes, where the shell never expands it)."""
    cmd = next(c for c in commands(search("vllm-eagle")) if "--speculative-config" in c["command"])
    i = cmd["argv"].index("--speculative-config")
    cfg = json.loads(expand(cmd["argv"][i + 1]))
    assert cfg["method"] == "eagle3" and cfg["model"] == USER_ENV["EAGLE3_DRAFT"]


def test_json_commands_carry_argument_lists():
    for c in commands(search("trtllm-hosts")):
        assert ("argv" in c) != ("file" in c)
        if "file" in c:
            assert c["command"].startswith("printf") and c["file"]["content"].endswith("\n")
        else:
            assert c["argv"][0] in ("vllm", "python", "trtllm-serve", "srun", "ray")


def test_an_nvl72_instance_over_several_trays_gets_multi_node_flags():
    """GB300 NVL72: one NVLink domain of 72 GPUs, hosts of 4. A 16-GPU instance is 4 hosts."""
    topo = load_topology("gb300_nvl72")
    assert (topo.gpus_per_node, topo.gpus_per_host) == (72, 4)
    d = search("vllm-dp-hosts")
    assert d["best"]["tp"] * d["best"]["ep"] * d["best"]["pp"] == 16
    cmds = [c["command"] for c in d["emit"]["commands"]]
    assert "--data-parallel-size-local 4" in cmds[0] and "--headless" in cmds[1]
    assert not any("CUDA_VISIBLE_DEVICES=16" in c or "single node (16" in c for c in cmds)


def test_host_gpus_must_divide_the_node(tmp_path):
    text = Path(load_topology("gb200_nvl72").path).read_text()
    bad = tmp_path / "t.toml"
    bad.write_text(text.replace("host_gpus = 4 ", "host_gpus = 5 "))
    r = run("estimate", "llama3.1-8b", str(bad), "--strategy", "tp=1")
    assert r.exit_code == 1 and "node.host_gpus" in r.output and "must divide" in r.output


# ----------------------------------------------------------------------------------------------
# Slurm

SLURM_STUBS = {     # programs a batch script calls, as a compute node would answer
    "scontrol": 'printf "%s\\n" ' + " ".join(f"gpu-{i:03d}" for i in range(64)),
    "getent": 'echo "10.9.0.${2#gpu-0} STREAM $2"',
    "srun": 'printf "%s\\0" "$@" > "$LOG/$$"',       # one file per call: they run at once
}


def run_batch(script: str, tmp_path) -> list:
    """The argument lists of every srun the script runs (stubs for Slurm's programs)."""
    bin_ = tmp_path / "bin"
    bin_.mkdir(parents=True)
    for name, body in SLURM_STUBS.items():
        p = bin_ / name
        p.write_text(f"#!/bin/bash\n{body}\n")
        p.chmod(p.stat().st_mode | stat.S_IEXEC)
    f = tmp_path / "job.sbatch"
    f.write_text(script)
    log = tmp_path / "srun"
    log.mkdir()
    env = {"PATH": f"{bin_}:{os.environ['PATH']}", "SLURM_JOB_NODELIST": "gpu-[000-063]",
           "LOG": str(log), "EAGLE3_DRAFT": "/ckpt/eagle3", "HOME": str(tmp_path)}
    r = subprocess.run(["bash", str(f)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    return [p.read_text().split("\0")[:-1] for p in sorted(log.iterdir())]


@pytest.mark.parametrize("name", ["sglang-mtp", "trtllm-hosts", "vllm-dp-hosts"])
def test_slurm_script_runs_every_server_on_its_host(name, tmp_path):
    d = search(name, "--emit-format", "slurm")
    for f in d["deployment_files"]:
        script = f["content"]
        assert script.startswith("#!/bin/bash\n") and "#SBATCH --nodes=" in script
        hosts = int(script.split("#SBATCH --nodes=")[1].split("\n")[0])
        calls = run_batch(script, tmp_path / f["deployment"].replace(" ", "-"))
        servers = [c for c in calls if "--nodelist" in " ".join(c[:4]) or
                   any(a.startswith("--nodelist") for a in c)]
        assert servers
        used = set()
        for c in calls:
            nodelist = next(a.split("=", 1)[1] for a in c if a.startswith("--nodelist="))
            used |= set(nodelist.split(","))
            assert all(not a.startswith("$") and "$" not in a for a in c), c   # all expanded
        assert used == {f"gpu-{i:03d}" for i in range(hosts)}   # every host, none beyond
        if f["deployment"] == "two pools":
            ips = {f"10.9.0.{i:02d}" for i in range(hosts)}
            args = " ".join(a for c in calls for a in c)
            assert any(ip in args for ip in ips)      # the hosts' own addresses reach the flags


# ----------------------------------------------------------------------------------------------
# Kubernetes

@pytest.mark.parametrize("name", ["sglang-mtp", "vllm-dp-hosts", "vllm-eagle"])
def test_lws_manifests_read_back(name):
    d = search(name, "--emit-format", "k8s-lws")
    for f in d["deployment_files"]:
        docs = list(yaml.safe_load_all(f["content"]))
        lws = [x for x in docs if x["kind"] == "LeaderWorkerSet"]
        assert lws and all(x["apiVersion"] == "leaderworkerset.x-k8s.io/v1" for x in lws)
        for x in lws:
            t = x["spec"]["leaderWorkerTemplate"]
            pods = [t[k] for k in ("leaderTemplate", "workerTemplate") if k in t]
            for pod in pods:
                c = pod["spec"]["containers"][0]
                script = c["args"][0]
                assert "$HEAD_IP" not in script and "$NODE_RANK" not in script
                host = load_topology(CASES[name][1]).gpus_per_host        # a pod is one host
                assert c["resources"]["limits"]["nvidia.com/gpu"] <= host
                parts = script.split(" && ")              # config files, env, the server
                assert parts[-1].startswith("exec ")
                for part in parts:
                    if not part.startswith("export "):
                        assert check(part.removeprefix("exec ")) == [], part
            if t["size"] > 1:       # the head binds its own address; workers reach it by name
                lead = t["leaderTemplate"]["spec"]["containers"][0]["args"][0]
                work = t["workerTemplate"]["spec"]["containers"][0]["args"][0]
                assert "$POD_IP" in lead and "$LWS_LEADER_ADDRESS" not in lead
                assert "$LWS_LEADER_ADDRESS" in work and "$LWS_WORKER_INDEX" in work
        services = {x["metadata"]["name"] for x in docs if x["kind"] == "Service"}
        assert not services & {x["metadata"]["name"] for x in lws}   # LWS's own headless one


@pytest.mark.parametrize("name", ["sglang-mtp", "vllm-dp-hosts", "trtllm-hosts", "vllm-eagle"])
@pytest.mark.parametrize("fmt", ["k8s-lws", "dynamo"])
def test_manifests_are_valid_against_the_projects_schemas(name, fmt):
    """Every LeaderWorkerSet and DynamoGraphDeployment lts writes validates against the CRD
    schema its project publishes (tests/data/schemas/SOURCES.md)."""
    if fmt == "k8s-lws" and name == "trtllm-hosts":
        out = search(name, "--emit-format", fmt, code=1)      # one MPI job over the hosts
        assert "--emit-format k8s-lws" in out and "TensorRT-LLM's MPI launch" in out
        return
    d = search(name, "--emit-format", fmt)
    kinds = {"k8s-lws": "LeaderWorkerSet", "dynamo": "DynamoGraphDeployment"}
    assert len(d["deployment_files"]) == 1 + ("emit_disagg" in d)
    for f in d["deployment_files"]:
        docs = list(yaml.safe_load_all(f["content"]))
        crds = [x for x in docs if x["kind"] == kinds[fmt]]
        assert crds
        for x in crds:
            assert validate_manifest(x) == [], (f["deployment"], validate_manifest(x))


def test_dynamo_graph_runs_the_engine_flags_lts_checked():
    d = search("sglang-mtp", "--emit-format", "dynamo")
    two = yaml.safe_load_all(d["deployment_files"][1]["content"])
    graph = next(x for x in two if x["kind"] == "DynamoGraphDeployment")
    comps = {c["name"]: c for c in graph["spec"]["components"]}
    assert {c["type"] for c in comps.values()} == {"frontend", "prefill", "decode"}
    dg = d["disagg"]
    for pool in ("prefill", "decode"):
        c = comps[pool]
        main = c["podTemplate"]["spec"]["containers"][0]
        assert main["command"] == ["python3", "-m", "dynamo.sglang"]
        assert ["--disaggregation-mode", pool] == main["args"][-2:] or \
            "--disaggregation-mode" in main["args"]
        assert "--host" not in main["args"] and "--port" not in main["args"]
        assert c["replicas"] == dg[f"{pool}_instances"]
        gpus = int(main["resources"]["limits"]["nvidia.com/gpu"])
        assert gpus * c.get("multinode", {}).get("nodeCount", 1) == dg[pool]["gpus"]
        assert gpus <= 4                                             # a GB300 tray
    decode = comps["decode"]["podTemplate"]["spec"]["containers"][0]["args"]
    assert "--speculative-algorithm" in decode


def test_dynamo_trtllm_engine_options_are_llm_api_keys():
    """TensorRT-LLM's workers take their engine options from a ConfigMap (--extra-engine-args):
    every key is one the LLM API of the release accepts."""
    d = search("trtllm-hosts", "--emit-format", "dynamo")
    for f in d["deployment_files"]:
        cm = next(x for x in yaml.safe_load_all(f["content"]) if x["kind"] == "ConfigMap")
        for name, text in cm["data"].items():
            assert "tensor_parallel_size:" in text and "max_num_tokens:" in text
            path, keys = yaml_keys('printf "' + text.replace("\n", "\\n") + '" > ' + name)
            assert unknown_yaml_keys(path, keys) == [], (name, text)


def test_trtllm_pool_files_keep_the_instance_options():
    """TensorRT-LLM's two pools write their own option files in place of the instance's: the
    speculative decoding and attention DP the instance file held stay in them."""
    r = run("search", "llama3.1-70b", "h100_dgx", "--gpus", "8", *SERVE, "--spec", "eagle",
            "--acceptance", "0.7", "--emit", "trtllm", "--json")
    d = json.loads(r.stdout)
    files = {c["file"]["path"]: c["file"]["content"] for c in d["emit_disagg"]["commands"]
             if "file" in c}
    assert "speculative_config:" in files["lts-gen.yaml"]
    assert "speculative_config:" in files["lts-ctx.yaml"]     # the context side too
    assert "hostname: 0.0.0.0" in files["lts-disagg.yaml"]     # reachable off its node
    r = run("search", "deepseek-v3", "gb200_nvl72", "--gpus", "32", *SERVE, "--emit", "trtllm",
            "--json")
    d = json.loads(r.stdout)
    files = {c["file"]["path"]: c["file"]["content"] for c in d["emit_disagg"]["commands"]
             if "file" in c}
    for pool, name in (("prefill", "lts-ctx.yaml"), ("decode", "lts-gen.yaml")):
        adp = any("enable_attention_dp" in n for n in d["emit_disagg"]["notes"]
                  if n.startswith(pool))
        assert ("enable_attention_dp: true" in files[name]) == adp, (pool, files[name])


def test_multi_host_instances_stay_inside_one_nvlink_domain():
    """NVL72: an instance over several 4-GPU trays is placed inside one 18-tray rack, never
    across two (its tensor-parallel group would lose NVLink)."""
    r = run("search", "moe1.6t", "gb300_nvl72", "--gpus", "144", *SERVE, "--emit", "sglang",
            "--json")
    d = json.loads(r.stdout)
    spans = [tuple(int(x) for x in re.search(r"nodes (\d+)-(\d+)", c["role"]).groups())
             for c in d["emit_disagg"]["commands"] if re.search(r"nodes (\d+)-(\d+)", c["role"])]
    assert spans and all(a // 18 == b // 18 for a, b in spans), spans


def test_a_refused_file_keeps_the_rest(tmp_path):
    """A deployment the format cannot express is one line in place of its file; the answer and
    the other file are still printed, and the exit status says a file is missing."""
    r = run("search", "llama3.1-70b", "h200_dgx", "--gpus", "16", *SERVE, "--emit", "trtllm",
            "--emit-format", "k8s-lws", "--emit-file", str(tmp_path / "d.yaml"))
    assert r.exit_code == 1
    assert "Launch with TensorRT-LLM" in r.output and "no file for two pools" in r.output
    assert (tmp_path / "d.yaml").exists() and not (tmp_path / "d.two-pools.yaml").exists()


def test_emit_file_to_a_device_writes_both_there():
    r = run("search", *CASES["vllm-eagle"], "--emit-format", "slurm", "--emit-file", "/dev/null")
    assert r.exit_code == 0 and not Path("/dev/null.two-pools").exists()
