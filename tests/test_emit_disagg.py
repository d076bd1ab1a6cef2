"""`lts search --phase serve --emit ENGINE` for the two-pool deployment (lts/emit_disagg.py):
each instance's command, the engine's disaggregation flags and router, and the GPU count the
commands ask for, counted from their own flags, against the deployment."""
import json
import shlex

import numpy as np
import pytest
from click.testing import CliRunner

from lts.engines import REAL_ENGINES
from lts.launch import emit
from lts.launch.vllm import LAUNCHER as VLLM
from lts.cli import cli
from lts.search.disagg import disaggregate
from lts.launch.emit_disagg import command_gpus, launch_disagg
from lts.launch.launcher import nodes
from lts.search.problems import ServeProblem
from lts.specs import load_model, load_topology
from lts.specs.strategy import instance_gpus, make_row, parse_strategy
from lts.specs.workload import Workload


@pytest.fixture(scope="module")
def mixtral():
    """Mixtral on 8 H100 (1024 in / 1024 out, TPOT <= 30 ms, TTFT <= 2 s): two pools fit."""
    p = ServeProblem(load_model("mixtral-8x7b"), load_topology("h100_dgx"), 1024, 1024, 30, 2000,
                     gpus=8)
    dg, _ = disaggregate(p)
    assert dg is not None
    return p, dg


@pytest.mark.parametrize("engine", REAL_ENGINES)
def test_disagg_commands_ask_for_the_deployments_gpus(mixtral, engine):
    p, dg = mixtral
    dl = launch_disagg(engine, p, dg, "mixtral-8x7b")
    d = dl.deployment
    assert d is not None and d.gpus <= 8
    sizes = [int(d.prefill.gpus[0])] * d.prefill_instances + [int(d.decode.gpus[0])] * \
        d.decode_instances
    served = [c for role, c in dl.commands if "instance" in role]
    assert [command_gpus(engine, c) for c in served] == sizes
    assert dl.gpus == sum(sizes) == d.gpus
    # each instance in its own mode, on its own port, and the router names every port
    router = " ".join(c for r, c in dl.commands if r.startswith("router"))   # and its file
    for i, (role, cmd) in enumerate((r, c) for r, c in dl.commands if "instance" in r):
        port = f"{8100 + i}"
        assert f"--port {port}" in cmd and port in router
        if engine == "sglang":
            assert f"--disaggregation-mode {role.split()[0]}" in cmd
        if engine == "vllm":
            assert "NixlConnector" in cmd and "VLLM_NIXL_SIDE_CHANNEL_PORT" in cmd
            # the proxy asks a prefill instance for one token past the prompt: room for the
            # whole request on both sides
            assert "--max-model-len 2048" in cmd
        if engine == "trtllm":
            assert "--backend pytorch --extra_llm_api_options lts-" in cmd
    assert {"vllm": "toy_proxy_server.py", "sglang": "--pd-disaggregation",
            "trtllm": "trtllm-serve disaggregated"}[engine] in router
    if engine == "trtllm":     # CacheTransceiverConfig (llm_args.py): max_tokens_in_buffer and a
        configs = [c for r, c in dl.commands             # backend, no other key
                   if "config file" in r and not r.startswith("router")]
        assert len(configs) == 2
        for cfg in configs:
            assert "cache_transceiver_config:\\n  backend: UCX\\n  max_tokens_in_buffer: 1024" \
                in cfg and "max_num_tokens" not in cfg
    for _, cmd in dl.commands:     # every command parses as shell words
        shlex.split(cmd)


STRATEGIES = ("tp=8", "tp=2,pp=2", "tp=1,ep=8,ffn1=experts,ffn2=experts",
              "tp=2,ep=4,ffn1=experts,ffn2=experts", "tp=8,pp=4",
              "tp=1,ep=16,pp=2,ffn1=experts,ffn2=experts", "tp=4,ep=16,ffn1=experts,ffn2=experts")


@pytest.mark.parametrize("engine", REAL_ENGINES)
def test_every_emitted_command_asks_for_the_instances_gpus(engine):
    """The peer's bug: a launch file asking for 64 GPUs on an 8-GPU deployment under attention
    data parallelism. Here the flags of every command the engine runs (the head node's, for
    several nodes) ask for exactly tp x ep x pp GPUs."""
    model, topo = load_model("mixtral-8x7b"), load_topology("h100_dgx")
    engine_cmd = {"vllm": "vllm serve", "sglang": "launch_server", "trtllm": "trtllm-serve"}
    checked = 0
    for strategy in STRATEGIES:
        row = parse_strategy(strategy + ",batch=64", True)
        if emit.check(engine, model, row):       # not runnable: never emitted as is
            continue
        cmds, _ = emit.commands(engine, model, topo, Workload(gpus=128), row, "mixtral-8x7b")
        heads = [c for role, c in cmds if engine_cmd[engine] in c and "worker" not in role]
        assert len(heads) == 1, cmds
        assert command_gpus(engine, heads[0]) == int(instance_gpus(row)), (strategy, heads[0])
        checked += 1
    assert checked >= 4


def test_search_emit_prints_and_jsons_the_two_pools():
    args = ["search", "mixtral-8x7b", "h100_dgx", "--gpus", "8", "--phase", "serve", "--isl",
            "1024", "--osl", "1024", "--tpot-slo-ms", "30", "--ttft-slo-ms", "2000",
            "--method", "megatron", "--emit", "sglang"]
    r = CliRunner().invoke(cli, args + ["--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    e = d["emit_disagg"]
    assert e["engine"] == "sglang" and e["gpus"] == e["deployment"]["gpus"] <= 8
    assert any("--disaggregation-mode prefill" in c["command"] for c in e["commands"])
    assert any("--disaggregation-mode decode" in c["command"] for c in e["commands"])
    text = CliRunner().invoke(cli, args, catch_exceptions=False).output
    assert "Launch the two pools with SGLang" in text and "sglang_router.launch_router" in text


def test_instances_never_share_a_gpu_and_multi_node_ones_take_whole_nodes():
    """Placement (8 GPUs a node): 4-GPU prefills then 12- and 16-GPU decodes (split by their
    commands over 2 nodes of 6 and of 8), then 3-GPU ones that must not straddle nodes."""
    from types import SimpleNamespace
    from lts.launch.emit_disagg import _instances

    def pool(tp, pp):
        row = make_row([0] * 12, tp=tp, pp=pp, batch=8)
        return SimpleNamespace(strategies=row[None], gpus=np.array([tp * pp]))

    for p_row, d_row, x, y in ((pool(4, 1), pool(4, 3), 1, 1), (pool(4, 1), pool(16, 1), 3, 1),
                               (pool(3, 1), pool(3, 1), 2, 3), (pool(4, 3), pool(2, 1), 1, 5)):
        dg = SimpleNamespace(prefill=p_row, decode=d_row, prefill_instances=x,
                             decode_instances=y)
        used = set()
        for _, _, row, at, span in _instances(dg, 8):
            size = int(instance_gpus(row))
            if span > 1:      # whole nodes from a node boundary, as many as its command uses
                assert at % 8 == 0 and span == nodes(size, 8)
                gpus = set(range(at, at + span * 8))
            else:             # inside one node
                assert at // 8 == (at + size - 1) // 8
                gpus = set(range(at, at + size))
            assert not used & gpus
            used |= gpus


def test_multi_node_instances_each_have_their_own_head():
    p = ServeProblem(load_model("llama3.1-405b"), load_topology("h100_dgx"), 1000, 1000, 50, 5000,
                     gpus=32)
    dg, _ = disaggregate(p)
    assert dg is not None and max(int(dg.prefill.gpus[0]), int(dg.decode.gpus[0])) > 8
    for engine in REAL_ENGINES:
        dl = launch_disagg(engine, p, dg, "llama3.1-405b")
        text = " ".join(c for _, c in dl.commands)
        assert "$HEAD_IP" not in text and "$NODE0_IP" in text
        heads = {c.split("$NODE")[1].split("_IP")[0] for r, c in dl.commands
                 if "instance" in r and "$NODE" in c}
        assert len(heads) >= 2              # the two pools' instances on different nodes
        if engine == "trtllm":              # the router's YAML expands the node addresses
            assert dl.commands[-2][0].startswith("router config file")
            assert dl.commands[-2][1].startswith('printf "')
        workers = [c for r, c in dl.commands if "worker" in r]
        if engine == "sglang":              # one command for the other nodes, each its rank
            assert workers and all("--node-rank $NODE_RANK " in c for c in workers)
        if engine == "vllm":                # one command per node: no rank left to set
            assert all("$NODE_RANK" not in c for c in workers)


def test_vllm_worker_nodes_bind_their_own_nixl_side_channel():
    """Each node of a multi-node vLLM instance runs its own scheduler (data parallel) or workers:
    VLLM_NIXL_SIDE_CHANNEL_HOST is that node's address, never its head's."""
    p = ServeProblem(load_model("deepseek-v3"), load_topology("h100_dgx"), 1024, 1024, 50, 5000,
                     gpus=48)
    model, topo = p.model, p.topo
    row = parse_strategy("tp=1,ep=16,batch=64", True)           # DP over 2 nodes
    roles, _ = emit.commands("vllm", model, topo, Workload(gpus=48), row, "deepseek-v3")
    out = VLLM.node_commands(roles, 3, 2, lambda n: f"$NODE{n}_IP")
    assert [own for _, _, own in out] == ["$NODE3_IP", "$NODE4_IP"]
    head, worker = out[0][1], out[1][1]
    assert "--data-parallel-address $NODE3_IP" in head and "--headless" not in head
    assert "--data-parallel-address $NODE3_IP" in worker and "$NODE_RANK" not in worker
    assert "--data-parallel-start-rank $((1*8)) --headless" in worker
    cmd = VLLM.disagg_command("decode", worker, 0, 16, 8101, 0, out[1][2], False)
    assert "VLLM_NIXL_SIDE_CHANNEL_HOST=$NODE4_IP " in cmd
    # three nodes: one command per worker node, each with its own address and rank
    roles, _ = emit.commands("vllm", model, topo, Workload(gpus=48), parse_strategy(
        "tp=1,ep=24,batch=64", True), "deepseek-v3")
    out = VLLM.node_commands(roles, 0, 3, lambda n: f"$NODE{n}_IP")
    assert [own for _, _, own in out] == ["$NODE0_IP", "$NODE1_IP", "$NODE2_IP"]
    assert ["$((2*8))" in c for _, c, _ in out] == [False, False, True]
    # Ray (a DP rank wider than a node): each node's ray start carries its own address
    roles, _ = emit.commands("vllm", load_model("mixtral-8x7b"), topo, Workload(gpus=32),
                             parse_strategy("tp=16,ep=2,batch=64,ffn1=experts,ffn2=experts",
                                            True), "mixtral-8x7b")
    out = VLLM.node_commands(roles, 0, 4, lambda n: f"$NODE{n}_IP")
    starts = [c for _, c, _ in out if "ray start" in c]
    assert starts[0].startswith("VLLM_NIXL_SIDE_CHANNEL_HOST=$NODE0_IP ray start --head")
    assert [c.split()[0] for c in starts[1:]] == [f"VLLM_NIXL_SIDE_CHANNEL_HOST=$NODE{n}_IP"
                                                  for n in (1, 2, 3)]
    launch = next((c, own) for _, c, own in out if "vllm serve" in c)
    assert "VLLM_NIXL_SIDE_CHANNEL_HOST" not in VLLM.disagg_command("decode", launch[0], 0, 32,
                                                                    8100, 0, launch[1], False)


def test_a_cluster_sized_deployment_is_launched_as_copies_of_a_unit():
    """Llama-3.1-70B on the whole 24,576-GPU topology pairs thousands of instances: the commands
    are a unit of at most MAX_LISTED instances, and a note says how many copies."""
    from lts.launch.emit_disagg import MAX_LISTED
    p = ServeProblem(load_model("llama3.1-70b"), load_topology("h100_dgx"), 1024, 1024)
    dg, _ = disaggregate(p)
    assert dg.prefill_instances + dg.decode_instances > MAX_LISTED
    dl = launch_disagg("sglang", p, dg, "llama3.1-70b")
    unit = dl.deployment
    assert unit.prefill_instances + unit.decode_instances <= MAX_LISTED
    assert dl.gpus == unit.gpus < dg.gpus
    assert len([r for r, _ in dl.commands if "instance" in r]) == \
        unit.prefill_instances + unit.decode_instances
    assert any("copies of it" in n for n in dl.notes)
