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

Each engine's part (its flags, config files, one command per node, router and transport) is its
launcher's (``emit.LAUNCHERS``: lts/launch/vllm.py, sglang.py, trtllm.py). Instances are placed
in order, prefill first, each on consecutive GPUs of the fewest nodes. The
GPUs the commands ask for are counted from their own flags (``command_gpus``) and checked against
the deployment: a command that asks for a different number of GPUs is a bug, never printed.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from . import emit, launcher
from ..engines import get
from ..engines.sglang import BOOTSTRAP_PORT
from ..search.disagg import Disagg, best_pair, decode_pool, prefill_pool
from ..search.problems import ServeProblem
from ..specs.strategy import instance_gpus

MAX_LISTED = 16               # instances listed one by one; a larger deployment as copies of a unit
FIRST_PORT = 8100             # instance i listens on FIRST_PORT + i


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
    # where each command runs (deployment files, ``deploy``): (its role within its instance,
    # first node, nodes it spans), None for a set-up step run once before the instances
    places: list = field(default_factory=list)
    # what deployment files write each pool's instances anew from (``deploy``): the problem,
    # and per pool one instance's (role, command) before its disaggregation flags
    problem: ServeProblem | None = None
    roles: dict = field(default_factory=dict)

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


def _instances(dg: Disagg, gpus_per_node: int, domain: int = 1):
    """(pool, index, strategy row, first GPU overall, nodes it spans) of every instance, prefill
    first, each on the next GPUs: one that fits a node (host) moves to a fresh node rather than
    straddle two; a larger one takes whole nodes, as many as its command splits it over
    (``launcher.nodes``: the fewest that divide it evenly), inside one NVLink domain of
    ``domain`` nodes where it fits one (an NVL72 rack of 18 trays)."""
    out, at = [], 0
    for pool, res, count in (("prefill", dg.prefill, dg.prefill_instances),
                             ("decode", dg.decode, dg.decode_instances)):
        row = res.strategies[0]
        size = int(instance_gpus(row))
        for k in range(count):
            fresh = -(-at // gpus_per_node) * gpus_per_node           # the next node's first GPU
            if size > gpus_per_node:
                nodes = launcher.nodes(size, gpus_per_node)
                first = fresh // gpus_per_node
                if nodes <= domain and first % domain + nodes > domain:   # not across two
                    fresh = -(-first // domain) * domain * gpus_per_node
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
    out.problem = problem
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
    gpn = problem.topo.gpus_per_node        # a unit of whole NVLink domains
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
    writer = emit.LAUNCHERS[engine]
    gpn = topo.gpus_per_host
    places = _instances(dg, gpn, topo.gpus_per_node // gpn)
    nodes = max(at // gpn + span for _, _, _, at, span in places)
    host = (lambda node: "localhost") if nodes == 1 else (lambda node: f"$NODE{node}_IP")
    launches = {"prefill": out.prefill, "decode": out.decode}
    endpoints = {"prefill": [], "decode": []}
    roles_of = out.roles = {pool: _pool_roles(out, pool, works[pool], model_arg, precision)
                            for pool in ("prefill", "decode")}
    cmds, counted, where_run = [], 0, []
    cmds += writer.pool_files(problem, launches, {pool: writer.file_lines(roles)
                                                  for pool, roles in roles_of.items()})
    where_run += [None] * len(cmds)
    for i, (pool, k, row, at, span) in enumerate(places):
        size = int(instance_gpus(row))
        node, port = at // gpn, FIRST_PORT + i
        roles = roles_of[pool]
        count = dg.prefill_instances if pool == "prefill" else dg.decode_instances
        label = f"{pool} instance {k + 1} of {count}"
        where = (f"GPU {at % gpn} of node {node}" if size == 1 else
                 f"GPUs {at % gpn}-{at % gpn + size - 1} of node {node}" if span == 1 else
                 f"nodes {node}-{node + span - 1}")
        endpoints[pool].append((host(node), port, BOOTSTRAP_PORT + k))
        for role, cmd, own in writer.node_commands(roles, node, span, host):
            if get(engine).command not in cmd:      # set-up steps (Ray, config files)
                # an instance's own config file: the pools' files (pool_files) replace it
                if not (writer.instance_file and writer.instance_file in cmd):
                    cmds.append((f"{label}: {role}", cmd))
                    where_run.append((role, node, span))
                continue
            if "worker" not in role and "each" not in role:
                counted += command_gpus(engine, cmd)
            cmds.append((f"{label} ({where}): {role}",
                         writer.disagg_command(pool, cmd, at % gpn, size, port, k, own,
                                               span == 1)))
            where_run.append((role, node, span))
    router = writer.router(endpoints, host(0))
    where = f"(node 0; clients call port {launcher.ROUTER_PORT})"
    for role, cmd in router if isinstance(router, list) else [("router", router)]:
        cmds.append((f"{role} {where}", cmd))
        where_run.append((role, 0, 1))
    out.commands, out.gpus, out.places = cmds, counted, where_run
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
               if any(launcher.NODE_RANK in c for _, c in cmds) else "")
            + "; instances are placed in order, prefill first" + (
                f"; as placed (a multi-node instance on whole nodes) they need {nodes} nodes, "
                f"more than the budget's {budget_nodes}" if nodes > budget_nodes else ""))
    out.notes += [f"{pool} pool: {n}" for pool in ("prefill", "decode")
                  for n in launches[pool].notes if "HEAD_IP" not in n]
    if writer.spec_on_prefill and getattr(problem, "spec", None) is not None:
        out.notes.append(f"{out.name}'s prefill instances take the same speculative flags as "
                         "the decode ones (the engine checks they match, or the prefill side "
                         "seeds the first draft step); lts's prefill pool cost leaves the "
                         "prefill side's draft pass out")
    out.notes.append(writer.transport_note())


def _pool_roles(dl: DisaggLaunch, pool: str, work, model_arg: str, precision) -> list:
    """(role, command) of one instance of ``pool`` before its disaggregation flags (the same for
    every instance of the pool): speculative decoding in the decode pool (and the prefill pool's
    draft pass where the engine needs it: ``Launcher.spec_on_prefill``), prefix caching in
    both; a request's tokens as the engine limits them, the whole request on both sides (vLLM's
    proxy asks the prefill instance for one token, SGLang's router sends it the whole
    request)."""
    writer, problem = emit.LAUNCHERS[dl.engine], dl.problem
    res = dl.deployment.prefill if pool == "prefill" else dl.deployment.decode
    roles, _ = emit.commands(dl.engine, problem.model, problem.topo, work, res.strategies[0],
                             model_arg, precision, max_len=problem.isl + problem.osl,
                             flags_from=problem,
                             speculate=pool == "decode" or writer.spec_on_prefill)
    return roles


def pool_commands(dl: DisaggLaunch, pool: str, port: int, host: str) -> list:
    """(role, command) of one instance of ``pool`` on hosts of its own (a pod group), listening
    on ``port`` at ``host``: the instance's commands (``dl.roles``) with the engine's
    disaggregation flags, as ``_commands`` writes them but placed by the deployment file, not on
    numbered nodes."""
    writer = emit.LAUNCHERS[dl.engine]
    res = dl.deployment.prefill if pool == "prefill" else dl.deployment.decode
    size = int(instance_gpus(res.strategies[0]))
    files = writer.pool_files(dl.problem, {"prefill": dl.prefill, "decode": dl.decode},
                              {p: writer.file_lines(r) for p, r in dl.roles.items()})
    out = [(r, c) for r, c in files if r.startswith(pool)]
    for role, cmd in dl.roles[pool]:
        if get(dl.engine).command not in cmd:
            if not (writer.instance_file and writer.instance_file in cmd):
                out.append((role, cmd))
            continue
        out.append((role, writer.disagg_command(pool, cmd, 0, size, port, 0, host, False)))
    return out


def _size(res) -> int:
    return int(res.gpus[0])
