"""Deployment files from launch commands (``lts search --emit ENGINE --emit-format FORMAT``):
what operators submit instead of typing commands on each host.

- ``shell``: the commands as printed (``emit``, ``emit_disagg``), one per host role.
- ``slurm``: one batch script (``sbatch FILE``) for one instance or a whole two-pool deployment:
  ``#SBATCH`` the hosts and GPUs per host, each host's address read from the allocation
  (``scontrol show hostnames``), every server started on its own host with
  ``srun --nodelist`` in the background, ``wait``. TensorRT-LLM's multi-host instance is its own
  MPI job step (``srun ... trtllm-llmapi-launch``), given its hosts.
- ``k8s-lws``: Kubernetes manifests: one LeaderWorkerSet (``leaderworkerset.x-k8s.io/v1``,
  github.com/kubernetes-sigs/lws) per kind of instance, a group of pods per instance (its leader
  on the first host, a worker on each other), the head's address from ``LWS_LEADER_ADDRESS`` and
  a worker's rank from ``LWS_WORKER_INDEX`` (both set by LWS in every pod); two pools add the
  router as a Deployment with a Service in front.
- ``dynamo``: an NVIDIA Dynamo ``DynamoGraphDeployment`` (``nvidia.com/v1beta1``,
  github.com/ai-dynamo/dynamo): a frontend and the engine's workers, prefill and decode apart
  for two pools; Dynamo's own router moves the KV cache and finds the workers.

Each file says in its header comment what lts found and what to set. The servers' flags are the
commands' own (the same engine flags, checked against the release: docs/launch.md).
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass

from ..engines import get
from ..engines.sglang import BOOTSTRAP_PORT
from ..specs.strategy import instance_gpus
from . import yamltext
from .emit import LAUNCHERS
from .emit_disagg import pool_commands
from .launcher import (HEAD_IP, NODE_RANK, PRINTF, ROUTER_PORT, USER_VARS, k8s_name, nodes,
                       split_env)

FORMATS = ("shell", "slurm", "k8s-lws", "dynamo")
SUFFIX = {"shell": ".sh", "slurm": ".sbatch", "k8s-lws": ".yaml", "dynamo": ".yaml"}


class DeployError(ValueError):
    """A deployment the format cannot express (said in one line, never a wrong file)."""


@dataclass
class Step:
    """One command placed: ``hosts`` it runs on (one copy each; () = a set-up step run once
    where the job starts), ``group``: one command over all of them (an MPI job step)."""
    role: str
    cmd: str
    hosts: tuple = ()
    group: bool = False


def _placed(role: str, cmd: str, first: int, span: int) -> list:
    """Steps of one command of an instance whose head is host ``first`` of ``span`` hosts: set-up
    steps (config files), a command for all hosts as one job step, one per worker host (its
    $NODE_RANK the host's rank in the instance), a named host, else the head."""
    if PRINTF.match(cmd) or "config file" in role:
        return [Step(role, cmd)]
    if role.startswith("all "):
        return [Step(role, cmd, tuple(range(first, first + span)), group=True)]
    m = re.search(r"\(node (\d+)\)", role)
    if m:
        return [Step(role, cmd, (int(m.group(1)),))]
    if "worker" in role:
        return [Step(f"{role}: rank {r}", cmd.replace(NODE_RANK, str(r)), (first + r,))
                for r in range(1, span)]
    return [Step(role, cmd, (first,))]


def one_pool_steps(launch, topo) -> tuple:
    """(steps, hosts) of one instance's commands (``emit.Launch``)."""
    hosts = nodes(int(instance_gpus(launch.strategy)), topo.gpus_per_host)
    steps = [s for role, cmd in launch.commands for s in _placed(role, cmd, 0, hosts)]
    return steps, hosts


def two_pool_steps(dl) -> tuple:
    """(steps, hosts) of a two-pool deployment's commands (``emit_disagg.DisaggLaunch``)."""
    steps = []
    for (role, cmd), place in zip(dl.commands, dl.places):
        if place is None:
            steps.append(Step(role, cmd))
            continue
        inner, first, span = place
        steps += [Step(role + s.role[len(inner):], s.cmd, s.hosts, s.group)
                  for s in _placed(inner, cmd, first, span)]
    hosts = 1 + max(h for s in steps for h in s.hosts)
    return steps, hosts


# ----------------------------------------------------------------------------------------------
# Slurm

def _srun(step: Step, per_host: int) -> str:
    """The batch script's line that starts ``step`` on its hosts."""
    nodelist = ",".join(f"${{NODES[{h}]}}" for h in step.hosts)
    cmd = step.cmd
    if step.group:                      # its own srun (TensorRT-LLM's MPI launch): add the hosts;
        # inside the job its GPUs come from the allocation (srun inherits --gpus-per-node, and
        # --gres=gpu with it is refused)
        cmd = re.sub(r" --gres=gpu:\d+", "", cmd)
        return cmd.replace("srun ", f'srun --nodelist="{nodelist}" ', 1) + " &"
    env, cmd = split_env(cmd)           # VAR=value before the program: srun runs env with them
    if cmd.startswith("ray start"):     # the step must outlive the command: Ray blocks
        cmd += " --block"
    prog = f"env {' '.join(env)} {cmd}" if env else cmd
    return (f'srun --nodes=1 --ntasks=1 --nodelist="{nodelist}" --gpus-per-node={per_host} '
            f"--overlap {prog} &")


def slurm(steps: list, hosts: int, topo, title: str, notes: list, per_host: int = 0) -> str:
    """A Slurm batch script that runs ``steps`` on ``hosts`` hosts of ``topo``, asking for
    ``per_host`` GPUs on each (default: whole hosts, exclusively; fewer share the host)."""
    whole = not per_host or per_host == topo.gpus_per_host
    per_host = per_host or topo.gpus_per_host
    text = "\n".join(s.cmd for s in steps)
    lines = ["#!/bin/bash", f"# {title}", "# Written by lts (docs/launch.md). Submit with: sbatch THIS_FILE",
             "#SBATCH --job-name=lts", f"#SBATCH --nodes={hosts}", "#SBATCH --ntasks-per-node=1",
             f"#SBATCH --gpus-per-node={per_host}"] + (["#SBATCH --exclusive"] if whole else [])
    if topo.gpus_per_node > topo.gpus_per_host and hosts > 1:
        domain = topo.gpus_per_node // topo.gpus_per_host
        lines.append(f"# an instance's hosts must share an NVLink domain of {domain} hosts "
                     f"({topo.gpus_per_node} GPUs; lts places none across two): with Slurm's "
                     f"topology/block plugin add #SBATCH --segment={min(hosts, domain)}")
    lines += [f"# {n}" for n in notes]
    lines += ["set -euo pipefail",
              "# the working directory must be on a filesystem every host sees (config files)",
              'mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")',
              'ip_of() { getent ahostsv4 "$1" | awk \'NR == 1 { print $1 }\'; }']
    used = sorted({int(k) for k in re.findall(r"\$NODE(\d+)_IP", text)} |
                  ({0} if HEAD_IP in text else set()))
    lines += [f'NODE{k}_IP=$(ip_of "${{NODES[{k}]}}")' for k in used]
    if HEAD_IP in text:
        lines.append("HEAD_IP=$NODE0_IP")
    for var in USER_VARS:
        if f"${var}" in text:
            lines.append(f': "${{{var}:?set {var} before sbatch (see the notes above)}}"')
    ray = False
    for s in steps:
        lines.append(f"# {s.role}")
        if not s.hosts:
            lines.append(s.cmd)
            continue
        if ray and not s.cmd.startswith("ray start"):
            lines.append("sleep 60                      # let every host join Ray first")
            ray = False
        ray = ray or s.cmd.startswith("ray start")
        lines.append(_srun(s, per_host))
    lines.append("wait")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------
# Kubernetes: LeaderWorkerSet

# each engine's container image, tagged with the release whose flags lts checked (the tag
# names as each project publishes them: vLLM's Docker Hub vllm/vllm-openai:v<version>, SGLang's
# lmsysorg/sglang:v<version>, TensorRT-LLM's NGC nvcr.io/nvidia/tensorrt-llm/release:<version>)
IMAGES = {"vllm": "vllm/vllm-openai:v{v}", "sglang": "lmsysorg/sglang:v{v}",
          "trtllm": "nvcr.io/nvidia/tensorrt-llm/release:{v}"}
K8S_PORT = 8000               # every server listens here in its own pod
SHM_GIB = 64                  # /dev/shm for NCCL and the engines' worker processes
LWS_API = "leaderworkerset.x-k8s.io/v1"
HF_SECRET = "hf-token-secret"  # a Secret holding HF_TOKEN (the name Dynamo's examples use)
LEADER, RANK = "$LWS_LEADER_ADDRESS", "$LWS_WORKER_INDEX"   # LWS sets both in every pod


def image(engine: str, version: str) -> str:
    return IMAGES[engine].format(v=version)


def _container(name: str, img: str, script: str, gpus: int, port: bool, env=()) -> dict:
    c = {"name": name, "image": img, "command": ["/bin/sh", "-c"], "args": [script],
         "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
         + [{"name": k, "value": v} for k, v in env],
         # the HuggingFace token for gated repositories, from a Secret if there is one (as
         # Dynamo's examples: hf-token-secret)
         "envFrom": [{"secretRef": {"name": HF_SECRET, "optional": True}}],
         "resources": {"limits": {"nvidia.com/gpu": gpus}},
         "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]}
    if port:
        c["ports"] = [{"containerPort": K8S_PORT, "name": "http"}]
        c["readinessProbe"] = {"tcpSocket": {"port": K8S_PORT}, "initialDelaySeconds": 30,
                               "periodSeconds": 10, "failureThreshold": 360}
    return c


def _pod(container: dict, labels: dict) -> dict:
    return {"metadata": {"labels": labels},
            "spec": {"containers": [container],
                     "volumes": [{"name": "dshm",
                                  "emptyDir": {"medium": "Memory", "sizeLimit": f"{SHM_GIB}Gi"}}]}}


def _script(setup: list, cmd: str, leader: bool) -> str:
    """A container's shell script: the set-up commands, the environment the command sets
    (exported: ``exec`` takes no assignments), then the server in the shell's place. The head's
    address is the pod's own on the leader (what it binds: vLLM's data-parallel address takes
    no name) and LWS's leader address on the workers; a worker's rank is LWS's index."""
    env, cmd = split_env(cmd)
    steps = list(setup) + ([f"export {' '.join(env)}"] if env else []) + [f"exec {cmd}"]
    body = " && ".join(steps)
    return body.replace(HEAD_IP, "$POD_IP" if leader else LEADER).replace(NODE_RANK, RANK)


def lws(name: str, engine: str, version: str, roles: list, hosts: int, replicas: int,
        gpus_per_pod: int, env=()) -> dict:
    """A LeaderWorkerSet of ``replicas`` groups of ``hosts`` pods each running one instance's
    ``roles`` ((role, command): set-up steps, then the head's and the workers' commands)."""
    setup = [c for r, c in roles if PRINTF.match(c) or "config file" in r]
    servers = [(r, c) for r, c in roles if c not in setup]
    if any(c.startswith(("ray ", "srun ")) for _, c in servers):
        raise DeployError(
            f"{name}: this instance starts as one job over its hosts (" +
            ("vLLM's Ray data parallelism" if any(c.startswith("ray ") for _, c in servers)
             else "TensorRT-LLM's MPI launch") +
            "), which --emit-format k8s-lws does not write; use slurm, dynamo or the commands")
    head = [c for r, c in servers if "worker" not in r]
    worker = [c for r, c in servers if "worker" in r]
    img = image(engine, version)
    text = " ".join(c for _, c in roles)
    env = list(env) + [(v, f"SET-{v}") for v in USER_VARS if f"${v}" in text]
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "lts"}
    template = {"size": hosts, "restartPolicy": "RecreateGroupOnPodRestart"}
    if hosts > 1:
        template["leaderTemplate"] = _pod(_container("server", img, _script(setup, head[0], True),
                                                     gpus_per_pod, True, env),
                                          {**labels, "role": "leader"})
        template["workerTemplate"] = _pod(_container("server", img, _script(setup, worker[0], False),
                                                     gpus_per_pod, False, env),
                                          {**labels, "role": "worker"})
    else:
        template["workerTemplate"] = _pod(_container("server", img,
                                                     _script(setup, head[0], True),
                                                     gpus_per_pod, True, env), labels)
    return {"apiVersion": LWS_API, "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "labels": labels},
            "spec": {"replicas": replicas, "leaderWorkerTemplate": template,
                     "startupPolicy": "LeaderCreated"}}


def leader_address(name: str, i: int) -> str:
    """The address of group ``i``'s leader pod: LWS names it <name>-<i> under the headless
    Service it creates with the set's name."""
    return f"{name}-{i}.{name}"


def service(name: str, selector: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": selector,
                     "ports": [{"name": "http", "port": K8S_PORT, "targetPort": K8S_PORT}]}}


def router_deployment(name: str, img: str, roles: list) -> dict:
    """The two pools' router: a Deployment of one pod (its config file, then the router)."""
    setup = [c for _, c in roles if PRINTF.match(c)]
    cmd = [c for _, c in roles if not PRINTF.match(c)][0]
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "lts"}
    c = {"name": "router", "image": img, "command": ["/bin/sh", "-c"],
         "args": [" && ".join(setup + [f"exec {cmd}"])],
         "ports": [{"containerPort": ROUTER_PORT, "name": "http"}]}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [c]}}}}


# ----------------------------------------------------------------------------------------------
# the file of one deployment

def _title(what: str, engine: str, version: str) -> str:
    return f"lts: {what}, {engine} {version}"


def _notes(notes: list) -> list:
    return [n for n in notes if "HEAD_IP" not in n and "NODEk_IP" not in n
            and "NODE_RANK" not in n]


def shell(commands: list, title: str, notes: list) -> str:
    """The commands as a file: each after a comment naming where it runs (one per host role:
    run each on its hosts, not the file as one script), the notes first."""
    lines = ["#!/bin/bash", f"# {title}", "# Written by lts (docs/launch.md): run each command "
             "on the host its comment names."] + [f"# {n}" for n in notes]
    for role, cmd in commands:
        lines += ["", f"# {role}", cmd]
    return "\n".join(lines) + "\n"


def _bind(engine: str, commands: list, port: int) -> list:
    """One instance's commands with its head server listening on every address at ``port``
    (SGLang binds 127.0.0.1 and TensorRT-LLM localhost by default: sglang 0.5.23
    server_args.py, tensorrt_llm/commands/serve.py; vLLM every address), so that clients on
    other hosts and a Kubernetes Service reach it."""
    prog = get(engine).command
    out = []
    for role, cmd in commands:
        if prog in cmd and "worker" not in role and "--port " not in cmd:
            cmd = f"{cmd} --host 0.0.0.0 --port {port}"
        out.append((role, cmd))
    return out


def one_pool(fmt: str, launch, problem, model_key: str) -> str:
    """The deployment file (``fmt``) of one instance (``emit.Launch``) and its copies."""
    model_key = model_key or "model"
    if launch.strategy is None or not launch.commands:
        raise DeployError("nothing to deploy: no strategy the engine runs is feasible")
    eng = get(launch.engine)
    version, topo = eng.flags_version, problem.topo
    size = int(instance_gpus(launch.strategy))
    title = _title(f"{model_key} on {size} GPUs of {topo.name}, one instance "
                   f"({launch.replicas} cop{'ies fit' if launch.replicas > 1 else 'y fits'} the "
                   "budget)", eng.label, version)
    if fmt == "shell":
        return shell(launch.commands, title, launch.notes)
    launch = copy.copy(launch)
    launch.commands = _bind(launch.engine, launch.commands, K8S_PORT)
    if fmt == "slurm":
        steps, hosts = one_pool_steps(launch, topo)
        extra = ([f"one job runs one copy: submit it {launch.replicas} times for the "
                  "budget's copies, behind one load balancer"] if launch.replicas > 1 else [])
        return slurm(steps, hosts, topo, title, extra + _notes(launch.notes),
                     per_host=size // hosts)
    if fmt == "k8s-lws":
        hosts = nodes(size, topo.gpus_per_host)
        name = k8s_name(f"lts-{model_key}-{launch.engine}")
        objs = [lws(name, launch.engine, version, launch.commands, hosts, launch.replicas,
                    size // hosts),
                # not the set's own name: LWS makes a headless Service of that name, which its
                # pods' addresses ($LWS_LEADER_ADDRESS) resolve through
                service(f"{name}-api", {"app.kubernetes.io/name": name,
                                        **({"role": "leader"} if hosts > 1 else {})})]
        return _yaml_file(title, objs, launch.notes, topo, hosts)
    if fmt == "dynamo":
        from .dynamo import graph
        return _yaml_file(title, graph(launch.engine, version, problem, model_key,
                                       {"": (launch.commands, launch.replicas, size)}),
                          launch.notes, topo, nodes(size, topo.gpus_per_host))
    raise DeployError(f"unknown format {fmt!r}")


def two_pools(fmt: str, dl, model_key: str) -> str:
    """The deployment file (``fmt``) of a two-pool deployment (``emit_disagg.DisaggLaunch``)."""
    model_key = model_key or "model"
    if dl.deployment is None or not dl.commands:
        raise DeployError("nothing to deploy: the engine runs no feasible pair of pools")
    eng = get(dl.engine)
    version, problem, dg = eng.flags_version, dl.problem, dl.deployment
    topo = problem.topo
    title = _title(f"{model_key} on {dg.gpus} GPUs of {topo.name}, two pools "
                   f"({dg.prefill_instances} prefill x {int(dg.prefill.gpus[0])} GPUs, "
                   f"{dg.decode_instances} decode x {int(dg.decode.gpus[0])} GPUs)",
                   eng.label, version)
    if fmt == "shell":
        return shell(dl.commands, title, dl.notes)
    if fmt == "slurm":
        steps, hosts = two_pool_steps(dl)
        return slurm(steps, hosts, topo, title, _notes(dl.notes))
    sizes = {"prefill": int(dg.prefill.gpus[0]), "decode": int(dg.decode.gpus[0])}
    counts = {"prefill": dg.prefill_instances, "decode": dg.decode_instances}
    hosts = {pool: nodes(size, topo.gpus_per_host) for pool, size in sizes.items()}
    if fmt == "k8s-lws":
        base = k8s_name(f"lts-{model_key}-{dl.engine}")[:50].rstrip("-")
        objs, endpoints = [], {}
        for pool in ("prefill", "decode"):
            name = f"{base}-{pool}"
            roles = pool_commands(dl, pool, K8S_PORT, "$POD_IP")
            objs.append(lws(name, dl.engine, version, roles, hosts[pool], counts[pool],
                            sizes[pool] // hosts[pool]))
            endpoints[pool] = [(leader_address(name, i), K8S_PORT, BOOTSTRAP_PORT)
                               for i in range(counts[pool])]
        router = LAUNCHERS[dl.engine].router(endpoints, "0.0.0.0")
        roles = router if isinstance(router, list) else [("router", router)]
        objs += [router_deployment(f"{base}-router", image(dl.engine, version), roles),
                 service(f"{base}-router", {"app.kubernetes.io/name": f"{base}-router"})]
        return _yaml_file(title, objs, dl.notes, topo, max(hosts.values()))
    if fmt == "dynamo":
        from .dynamo import graph
        pools = {pool: (pool_commands(dl, pool, K8S_PORT, "$POD_IP"), counts[pool], sizes[pool])
                 for pool in ("prefill", "decode")}
        return _yaml_file(title, graph(dl.engine, version, problem, model_key, pools),
                          dl.notes, topo, max(hosts.values()))
    raise DeployError(f"unknown format {fmt!r}")


def _yaml_file(title: str, objs: list, notes: list, topo, hosts: int) -> str:
    head = [f"# {title}", "# Written by lts (docs/launch.md). Apply with: kubectl apply -f THIS_FILE"]
    if hosts > 1 and topo.gpus_per_node > topo.gpus_per_host:
        head.append(f"# an instance spans {hosts} hosts of one {topo.gpus_per_node}-GPU NVLink "
                    "domain: its pods need the same NVLink domain (on GB200/GB300 NVL72, a "
                    "ComputeDomain of NVIDIA's DRA driver) for NCCL to use NVLink across hosts")
    body = yamltext.dump_all(objs)
    head += [f"# replace SET-{v} below with {v} (the notes say what it is)" for v in USER_VARS
             if f"SET-{v}" in body]
    head += [f"# {n}" for n in _notes(notes)]
    return "\n".join(head) + "\n" + body
