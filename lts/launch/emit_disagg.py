"""Launch commands for a disaggregated deployment (``lts search --phase serve --emit ENGINE``):
x prefill instances and y decode instances, each pool with its own strategy, the KV cache of each
request crossing from a prefill to a decode instance, and the engine's router in front.

Each pool's instance command is ``emit.launch`` on that pool's phase (its faithfulness, nearest
runnable strategy and notes as for one instance), plus the engine's disaggregation flags. Where
an engine cannot run a pool's strategy and runs the nearest one instead, the pools are paired
again (``disagg.best_pair``), so the instance counts fit the strategies launched.

- vLLM (``NixlConnector``; vllm 0.33.0 vllm/distributed/kv_transfer/kv_connector/v1/nixl/):
  every instance ``--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'``
  with its own ``VLLM_NIXL_SIDE_CHANNEL_PORT`` on a host (the port is the base plus the DP rank's
  index, nixl/base_scheduler.py) and, across hosts, ``VLLM_NIXL_SIDE_CHANNEL_HOST``: the address
  the node's own scheduler binds and advertises, so each node of a multi-node instance gets its
  own (vllm/envs.py; vllm/v1/executor/ray_utils.py keeps it out of what Ray copies from the
  head, so under Ray it goes on each node's ``ray start``); the router is the repository's
  ``tests/v1/kv_connector/nixl_integration/toy_proxy_server.py`` (``--prefiller-hosts/-ports``,
  ``--decoder-hosts/-ports``; not in the wheel, not checked).
- SGLang (sglang 0.5.23 sglang/srt/arg_groups/fields/disagg.py, device.py):
  ``--disaggregation-mode prefill|decode`` with ``--disaggregation-transfer-backend nixl``
  (Mooncake, the default, also needs ``--disaggregation-ib-device``), ``--base-gpu-id`` for a
  second instance on a node, each prefill instance its own ``--disaggregation-bootstrap-port``
  (default 8998); the router ``python -m sglang_router.launch_router --pd-disaggregation
  --prefill URL PORT ... --decode URL`` (the sglang-router package, not checked).
- TensorRT-LLM (tensorrt_llm/llmapi/llm_args.py CacheTransceiverConfig, a pydantic model that
  rejects unknown keys; tensorrt_llm/llmapi/disagg_utils.py): context servers with
  ``disable_overlap_scheduler: True`` and ``cache_transceiver_config`` (``backend: UCX``,
  ``max_tokens_in_buffer`` at least the prompt; an unknown key such as the older
  ``max_num_tokens`` fails validation) in their
  ``--extra_llm_api_options`` YAML, generation servers with the transceiver; ``trtllm-serve
  disaggregated -c`` a YAML listing both.

Instances are placed in order, prefill first, each on consecutive GPUs of the fewest nodes. The
GPUs the commands ask for are counted from their own flags (``command_gpus``) and checked against
the deployment: a command that asks for a different number of GPUs is a bug, never printed.

Imports: emit, engines (the registry; vLLM's and SGLang's default ports), disagg, problems,
strategy.
"""
from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass, field

from . import emit
from ..engines import get, sglang, vllm
from ..search.disagg import Disagg, best_pair, decode_pool, prefill_pool
from ..search.problems import ServeProblem
from ..specs.strategy import EP, PP, TP

ROUTER_PORT = 8000            # what clients call
MAX_LISTED = 16               # instances listed one by one; a larger deployment as copies of a unit
FIRST_PORT = 8100             # instance i listens on FIRST_PORT + i
DISAGG_YAML = "lts-disagg.yaml"
POOL_YAML = {"prefill": "lts-ctx.yaml", "decode": "lts-gen.yaml"}
TRANSCEIVER_BACKEND = "UCX"   # CacheTransceiverConfig.backend: DEFAULT, UCX, NIXL, (MOONCAKE,) MPI


@dataclass
class DisaggLaunch:
    """What ``--emit ENGINE`` prints for the two-pool deployment: each pool's ``emit.Launch``,
    the deployment the commands run (``deployment``: re-paired when a pool's strategy was
    replaced by its nearest runnable one), the commands in order and notes. ``gpus``: the GPUs
    the commands ask for, counted from their flags."""
    engine: str
    version_checked: str
    docs: str
    found: Disagg
    deployment: Disagg | None
    prefill: emit.Launch
    decode: emit.Launch
    commands: list = field(default_factory=list)      # (role, command)
    notes: list = field(default_factory=list)
    gpus: int = 0

    @property
    def name(self) -> str:
        return get(self.engine).label

    @property
    def faithful(self) -> bool:
        return self.prefill.faithful and self.decode.faithful


def _flag(cmd: str, name: str, default: int = 1) -> int:
    m = re.search(rf"(?:^|\s){re.escape(name)}[ =](\d+)", cmd)
    return int(m.group(1)) if m else default


def command_gpus(engine: str, cmd: str) -> int:
    """The GPUs one engine command asks for, from its own flags: the product of the engine's
    ``gpu_flags`` (vLLM tensor x pipeline x data parallel sizes; SGLang --tp-size x --pp-size;
    TensorRT-LLM --tp_size x --pp_size, attention DP ranks inside the tp size)."""
    return math.prod(_flag(cmd, name) for name in get(engine).gpu_flags)


def _instances(dg: Disagg, gpus_per_node: int):
    """(pool, index, strategy row, first GPU overall, nodes it spans) of every instance, prefill
    first, each on the next GPUs: one that fits a node moves to a fresh node rather than
    straddle two; a larger one takes whole nodes, as many as its command splits it over
    (``emit._nodes``: the fewest that divide it evenly)."""
    out, at = [], 0
    for pool, res, count in (("prefill", dg.prefill, dg.prefill_instances),
                             ("decode", dg.decode, dg.decode_instances)):
        row = res.strategies[0]
        size = int(row[TP] * row[EP] * row[PP])
        for k in range(count):
            fresh = -(-at // gpus_per_node) * gpus_per_node           # the next node's first GPU
            if size > gpus_per_node:
                nodes = emit._nodes(size, gpus_per_node)
                out.append((pool, k, row, fresh, nodes))
                at = fresh + nodes * gpus_per_node
                continue
            if at // gpus_per_node != (at + size - 1) // gpus_per_node:
                at = fresh
            out.append((pool, k, row, at, 1))
            at += size
    return out


def launch_disagg(engine: str, problem: ServeProblem, dg: Disagg, model_arg: str,
                  precision: str | None = None) -> DisaggLaunch:
    """The commands that run the disaggregated deployment ``dg`` on the engine."""
    # each pool's phase on instances no larger than the one found: a strategy the engine runs
    # in its place must leave the other pool its GPUs
    pools = {"prefill": prefill_pool(problem, gpus=int(dg.prefill.gpus[0])),
             "decode": decode_pool(problem, gpus=int(dg.decode.gpus[0]))}
    p_launch = emit.launch(engine, pools["prefill"], dg.prefill.strategies[0], model_arg,
                           precision, best_result=dg.prefill)
    d_launch = emit.launch(engine, pools["decode"], dg.decode.strategies[0], model_arg,
                           precision, best_result=dg.decode)
    eng = get(engine)
    out = DisaggLaunch(engine, eng.flags_version, eng.disagg_docs, dg, dg, p_launch, d_launch)
    if p_launch.result is None or d_launch.result is None:
        out.deployment = None
        out.notes.append(f"{out.name} runs no feasible strategy for one of the pools: nothing "
                         "to launch")
        return out
    if not out.faithful:           # the pools the engine runs, paired again
        out.deployment = best_pair(problem, [p_launch.result], [d_launch.result])
        if out.deployment is None:
            out.notes.append("the strategies the engine runs do not fit the GPU budget as two "
                             "pools: nothing to launch")
            return out
    whole = out.deployment
    if whole.prefill_instances + whole.decode_instances > MAX_LISTED:
        out.deployment = _unit(problem, whole)
        copies = whole.gpus // out.deployment.gpus
        out.notes.append(
            f"the whole deployment ({whole.prefill_instances} prefill + "
            f"{whole.decode_instances} decode instances on {whole.gpus:,} GPUs, "
            f"{whole.tokens_per_s_per_gpu:,.1f} output tokens/s per GPU) is more instances than "
            f"a command list should hold: below is a unit of {out.deployment.gpus} GPUs "
            f"({out.deployment.tokens_per_s_per_gpu:,.1f} per GPU); run {copies:,} copies of it on "
            "further nodes, each with its own router, behind one load balancer")
    _commands(out, problem, {k: v.work for k, v in pools.items()}, model_arg, precision)
    return out


def _unit(problem: ServeProblem, whole: Disagg) -> Disagg:
    """The deployment's pools on the fewest whole nodes that hold at most MAX_LISTED instances
    and come within 1% of its output tokens/s per GPU (else the best such unit)."""
    gpn = problem.topo.gpus_per_node
    best = None
    for nodes in range(1, whole.gpus // gpn + 2):
        d = best_pair(problem, [whole.prefill], [whole.decode], budget=nodes * gpn)
        if d is None or d.prefill_instances + d.decode_instances > MAX_LISTED:
            continue
        if best is None or d.tokens_per_s_per_gpu > best.tokens_per_s_per_gpu:
            best = d
        if d.tokens_per_s_per_gpu >= 0.99 * whole.tokens_per_s_per_gpu:
            break
    return best or whole


def _commands(out: DisaggLaunch, problem: ServeProblem, works: dict, model_arg: str,
              precision) -> None:
    engine, dg, topo = out.engine, out.deployment, problem.topo
    gpn = topo.gpus_per_node
    places = _instances(dg, gpn)
    nodes = max(at // gpn + span for _, _, _, at, span in places)
    host = (lambda node: "localhost") if nodes == 1 else (lambda node: f"$NODE{node}_IP")
    launches = {"prefill": out.prefill, "decode": out.decode}
    endpoints = {"prefill": [], "decode": []}
    # a request's tokens as the engine limits them: the whole request on both sides (vLLM's proxy
    # asks the prefill instance for one token, SGLang's router sends it the whole request)
    max_len = problem.isl + problem.osl
    cmds, counted = [], 0
    if engine == "trtllm":
        for pool, yaml in POOL_YAML.items():
            lines = ["cache_transceiver_config:", f"  backend: {TRANSCEIVER_BACKEND}",
                     f"  max_tokens_in_buffer: {problem.isl}"]
            if pool == "prefill":
                lines.insert(0, "disable_overlap_scheduler: True")
            if int(launches[pool].strategy[EP]) > 1:
                lines.append("enable_attention_dp: true")
            cmds.append((f"{pool} config file (every node)", _printf(lines, yaml)))
    for i, (pool, k, row, at, span) in enumerate(places):
        size = int(row[TP] * row[EP] * row[PP])
        node, port = at // gpn, FIRST_PORT + i
        roles, _ = emit.commands(engine, problem.model, topo, works[pool], row, model_arg,
                                 precision, max_len=max_len)
        count = dg.prefill_instances if pool == "prefill" else dg.decode_instances
        label = f"{pool} instance {k + 1} of {count}"
        where = (f"GPU {at % gpn} of node {node}" if size == 1 else
                 f"GPUs {at % gpn}-{at % gpn + size - 1} of node {node}" if span == 1 else
                 f"nodes {node}-{node + span - 1}")
        endpoints[pool].append((host(node), port, sglang.BOOTSTRAP_PORT + k))
        for role, cmd, own in _node_commands(engine, roles, node, span, host):
            if get(engine).command not in cmd:      # set-up steps (Ray, config files)
                if not (engine == "trtllm" and emit.TRTLLM_YAML in cmd):
                    cmds.append((f"{label}: {role}", cmd))
                continue
            if "worker" not in role and "each" not in role:
                counted += command_gpus(engine, cmd)
            cmds.append((f"{label} ({where}): {role}",
                         _disagg_command(engine, pool, cmd, at % gpn, size, port, k,
                                         own, span == 1)))
    cmds.append(("router (any node; clients call port "
                 f"{ROUTER_PORT})", _router(engine, endpoints, host(0))))
    out.commands, out.gpus = cmds, counted
    if counted != dg.gpus:     # the flags must ask for exactly the deployment's GPUs
        raise RuntimeError(f"emit_disagg: the commands ask for {counted} GPUs, the deployment "
                           f"uses {dg.gpus}")
    out.notes.append(
        f"GPUs: {dg.prefill_instances} x {_size(dg.prefill)} (prefill) + {dg.decode_instances} x "
        f"{_size(dg.decode)} (decode) = {dg.gpus} of the budget's "
        f"{problem.work.budget(problem.topo)}, counted again from the commands' own flags")
    budget_nodes = -(-problem.work.budget(problem.topo) // gpn)
    if nodes > 1:
        out.notes.append(
            f"set NODEk_IP to node k's address (k = 0..{nodes - 1}) on every node"
            + ("; on the nodes of a multi-node instance NODE_RANK is the node's rank within it"
               if any(emit.NODE_RANK in c for _, c in cmds) else "")
            + "; instances are placed in order, prefill first" + (
                f"; as placed (a multi-node instance on whole nodes) they need {nodes} nodes, "
                f"more than the budget's {budget_nodes}" if nodes > budget_nodes else ""))
    out.notes += [f"{pool} pool: {n}" for pool in ("prefill", "decode")
                  for n in launches[pool].notes if "HEAD_IP" not in n]
    out.notes.append(_transport_note(engine))


def _node_commands(engine: str, roles: list, node: int, span: int, host) -> list:
    """(role, command, the address of the node it runs on) of one instance's commands: its head
    is its first node. vLLM's NIXL side channel binds the address of the node the scheduler runs
    on (VLLM_NIXL_SIDE_CHANNEL_HOST, vllm 0.33.0 nixl/base_scheduler.py), so a command written
    for every worker node ($NODE_RANK) becomes one command per node, each with its own address;
    under Ray the variable goes on each node's ``ray start`` (vllm 0.33.0
    vllm/v1/executor/ray_utils.py WORKER_SPECIFIC_ENV_VARS: Ray does not copy it from the head)."""
    out = []
    for role, cmd in roles:
        cmd = cmd.replace(emit.HEAD_IP, f"$NODE{node}_IP")
        ray = engine == "vllm" and cmd.startswith("ray start")
        per_node = engine == "vllm" and span > 1 and "worker" in role and \
            (emit.NODE_RANK in cmd or ray)
        for r in range(1, span) if per_node else (0,):
            own = host(node + r)
            role_r = f"worker node {r} of {span - 1} (node {node + r})" if per_node else role
            cmd_r = cmd.replace(emit.NODE_RANK, str(r)) if per_node else cmd
            if ray:
                cmd_r = f"VLLM_NIXL_SIDE_CHANNEL_HOST={own} {cmd_r}"
            elif engine == "vllm" and "--data-parallel-backend ray" in cmd_r:
                own = "localhost"          # set on each node's ray start instead
            out.append((role_r, cmd_r, own))
    return out


def _size(res) -> int:
    return int(res.gpus[0])


def _disagg_command(engine, pool, cmd, first, size, port, k, host, one_node) -> str:
    devices = ",".join(str(first + j) for j in range(size))
    if engine == "vllm":
        kv = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"},
                        separators=(",", ":"))
        env = [f"VLLM_NIXL_SIDE_CHANNEL_PORT={vllm.NIXL_PORT + first}"]
        if host != "localhost":
            env.append(f"VLLM_NIXL_SIDE_CHANNEL_HOST={host}")
        if one_node:
            env.insert(0, f"CUDA_VISIBLE_DEVICES={devices}")
        return " ".join(env + [cmd, f"--port {port}", f"--kv-transfer-config {shlex.quote(kv)}"])
    if engine == "sglang":
        extra = [f"--disaggregation-mode {pool}", "--disaggregation-transfer-backend nixl",
                 f"--port {port}"]
        if one_node and first:
            extra.append(f"--base-gpu-id {first}")
        if pool == "prefill":
            extra.append(f"--disaggregation-bootstrap-port {sglang.BOOTSTRAP_PORT + k}")
        return " ".join([cmd] + extra)
    cmd = " ".join(cmd.replace(f"--extra_llm_api_options {emit.TRTLLM_YAML}", "").split())
    # the transport is cache_transceiver_config.backend in the pool's YAML
    served = [cmd, f"--host {host} --port {port}", "--backend pytorch",
              f"--extra_llm_api_options {POOL_YAML[pool]}"]
    if cmd.startswith("srun"):
        return " ".join(served)
    return " ".join(([f"CUDA_VISIBLE_DEVICES={devices}"] if one_node else []) + served)


def _router(engine: str, endpoints: dict, head: str) -> str:
    pre, dec = endpoints["prefill"], endpoints["decode"]
    if engine == "vllm":
        return " ".join(["python tests/v1/kv_connector/nixl_integration/toy_proxy_server.py",
                         f"--host 0.0.0.0 --port {ROUTER_PORT}",
                         "--prefiller-hosts", *(h for h, _, _ in pre),
                         "--prefiller-ports", *(str(p) for _, p, _ in pre),
                         "--decoder-hosts", *(h for h, _, _ in dec),
                         "--decoder-ports", *(str(p) for _, p, _ in dec)])
    if engine == "sglang":
        return " ".join(["python -m sglang_router.launch_router --pd-disaggregation",
                         *(f"--prefill http://{h}:{p} {b}" for h, p, b in pre),
                         *(f"--decode http://{h}:{p}" for h, p, _ in dec),
                         f"--host 0.0.0.0 --port {ROUTER_PORT}"])
    lines = [f"hostname: {head}", f"port: {ROUTER_PORT}", "backend: pytorch"]
    for key, eps in (("context_servers", pre), ("generation_servers", dec)):
        lines += [f"{key}:", f"  num_instances: {len(eps)}", "  urls:"]
        lines += [f"    - {h}:{p}" for h, p, _ in eps]
    return f"{_printf(lines, DISAGG_YAML)} && trtllm-serve disaggregated -c {DISAGG_YAML}"


def _printf(lines, path: str) -> str:
    """A shell command that writes ``lines`` to ``path``: printf turns each \\n into a line
    break; in double quotes, so that the $NODEk_IP in them expand (the lines hold no other
    character the shell reads there)."""
    return 'printf "' + "\\n".join(lines) + '\\n" > ' + path


def _transport_note(engine: str) -> str:
    if engine == "vllm":
        return ("the KV cache moves with NIXL (pip install nixl; UCX_NET_DEVICES picks the "
                "NICs); the proxy script is in vLLM's source tree, run it from a checkout")
    if engine == "sglang":
        return ("the KV cache moves with NIXL (pip install nixl); for Mooncake, the default, use "
                "--disaggregation-transfer-backend mooncake --disaggregation-ib-device DEVICE; "
                "the router is pip install sglang-router")
    return (f"the KV cache moves with {TRANSCEIVER_BACKEND} (cache_transceiver_config.backend; "
            "NIXL and MPI are the other choices); its max_tokens_in_buffer holds one prompt")
