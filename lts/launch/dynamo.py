"""An NVIDIA Dynamo ``DynamoGraphDeployment`` from launch commands (``--emit-format dynamo``).

The structure is Dynamo 1.4.0's ``nvidia.com/v1beta1`` (its examples' default since 2026-08;
``v1alpha1`` is served but deprecated): ``spec.backendFramework`` and ``spec.components``, a list
of ``{name, type (frontend|worker|prefill|decode), replicas, multinode.nodeCount,
podTemplate.spec.containers[{name: main, image, workingDir, command, args, resources}]}``
(ai-dynamo/dynamo deploy/operator/config/crd/bases/nvidia.com_dynamographdeployments.yaml at
the v1.4.0 branch cut, e147ceea; tests/data/schemas/). Each worker runs Dynamo's wrapper of the
engine (``python3 -m dynamo.vllm|sglang|trtllm``), which takes the engine's own flags (vLLM's
and SGLang's on the command line; TensorRT-LLM's LLM API options in ``--extra-engine-args``, a
YAML file mounted here from a ConfigMap) and ``--disaggregation-mode prefill|decode`` (examples/
backends/*/deploy/disagg*.yaml at the same commit). Dynamo's frontend routes requests, its
workers find each other and move the KV cache, and its operator places a worker over
``multinode.nodeCount`` hosts; so the commands' addresses, ports, node ranks and the router are
left out, and the remaining flags are the engine flags lts checked.
"""
from __future__ import annotations

from ..engines import get
from .launcher import USER_VARS, command_dict, k8s_name, nodes, written

API = "nvidia.com/v1beta1"
DYNAMO_VERSION = "1.4.0"       # the release whose CRD the file follows (tests/data/schemas)
# Dynamo's runtime images per engine (nvcr.io/nvidia/ai-dynamo/{vllm,sglang,tensorrtllm}-runtime,
# the names Dynamo's docs pin); each bundles its own engine release
IMAGES = {"vllm": "vllm-runtime", "sglang": "sglang-runtime", "trtllm": "tensorrtllm-runtime"}
MODULE = {"vllm": "dynamo.vllm", "sglang": "dynamo.sglang", "trtllm": "dynamo.trtllm"}
WORKDIR = {"vllm": "/workspace/examples/backends/vllm",
           "sglang": "/workspace/examples/backends/sglang", "trtllm": "/workspace"}
FRONTEND_PORT = 8000
CONFIG_DIR = "/workspace/lts"  # where a TensorRT-LLM worker's engine options are mounted

# what Dynamo sets itself: placement, addresses, ports, ranks (flag -> takes a value)
DROP = {"vllm": {"--host": 1, "--port": 1, "--nnodes": 1, "--node-rank": 1, "--master-addr": 1,
                 "--headless": 0, "--data-parallel-address": 1, "--data-parallel-rpc-port": 1,
                 "--data-parallel-start-rank": 1, "--kv-transfer-config": 1},
        "sglang": {"--host": 1, "--port": 1, "--nnodes": 1, "--node-rank": 1,
                   "--dist-init-addr": 1, "--base-gpu-id": 1, "--disaggregation-mode": 1,
                   "--disaggregation-bootstrap-port": 1}}
# trtllm-serve flags -> the LLM API option each sets (tensorrt_llm/commands/serve.py passes
# them to the LLM API as these; llm_args.py)
TRT_OPTIONS = {"--tp_size": "tensor_parallel_size", "--pp_size": "pipeline_parallel_size",
               "--ep_size": "moe_expert_parallel_size", "--max_batch_size": "max_batch_size",
               "--max_num_tokens": "max_num_tokens", "--max_seq_len": "max_seq_len",
               "--kv_cache_free_gpu_memory_fraction": "kv_cache_config.free_gpu_memory_fraction",
               "--enable_chunked_prefill": "enable_chunked_prefill"}


def _words(cmd: str) -> list:
    """The program and its arguments, as the shell passes them (``command_dict``)."""
    return command_dict("", cmd)["argv"]


def _flags(words: list) -> list:
    """(flag, value or None) of option words: a flag takes the next word when that is not a flag."""
    out, i = [], 0
    while i < len(words):
        w = words[i]
        if i + 1 < len(words) and not words[i + 1].startswith("--"):
            out.append((w, words[i + 1]))
            i += 2
        else:
            out.append((w, None))
            i += 1
    return out


def _args(engine: str, cmd: str, pool: str) -> tuple:
    """(Dynamo worker args, TensorRT-LLM option lines or []) of an instance's head command."""
    words = _words(cmd)
    if engine == "vllm":
        model, flags = words[2], _flags(words[3:])
        args = ["--model", model]
    elif engine == "sglang":
        flags = _flags(words[3:])
        args = []
    else:
        at = words.index("trtllm-serve")
        model, flags = words[at + 1], _flags(words[at + 2:])
        options = []
        for flag, value in flags:
            key = TRT_OPTIONS.get(flag)
            if key is None:
                continue                 # --host, --port, --backend, --extra_llm_api_options
            parent, _, leaf = key.partition(".")
            line = f"{leaf or parent}: {value if value is not None else 'true'}"
            options += [f"{parent}:", f"  {line}"] if leaf else [line]
        args = ["--model-path", model, "--extra-engine-args", f"{CONFIG_DIR}/{pool or 'engine'}.yaml"]
        if pool:
            args += ["--disaggregation-mode", pool]
        return args, options
    for flag, value in flags:
        if flag in DROP[engine]:
            continue
        args += [flag] if value is None else [flag, value]
    if pool:
        args += ["--disaggregation-mode", pool]
        if engine == "vllm":
            args += ["--kv-transfer-config",
                     '{"kv_connector":"NixlConnector","kv_role":"kv_both"}']
    return args, []


def _k8s_vars(arg: str, names: list) -> str:
    for v in names:
        arg = arg.replace(f"${v}", f"$({v})")
    return arg


def _yaml_lines(roles: list) -> list:
    """The LLM API option lines an instance's config-file commands write (TensorRT-LLM)."""
    return [line for _, cmd in roles for line in (written(cmd) or ("", []))[1]]


def graph(engine: str, version: str, problem, model_key: str, pools: dict) -> list:
    """The DynamoGraphDeployment (and, for TensorRT-LLM, the ConfigMap of its workers' engine
    options) of ``pools``: {"": (roles, replicas, GPUs)} for one aggregated instance, or
    {"prefill": ..., "decode": ...}; each roles the (role, command) of one instance."""
    image = f"nvcr.io/nvidia/ai-dynamo/{IMAGES[engine]}:{DYNAMO_VERSION}"
    name = k8s_name(f"lts-{model_key}-{engine}")[:50].rstrip("-") + \
        ("-disagg" if "prefill" in pools else "")      # both files can be applied side by side
    per_host = problem.topo.gpus_per_host
    components = [{"name": "frontend", "type": "frontend", "replicas": 1,
                   "podTemplate": {"spec": {"containers": [{
                       "name": "main", "image": image,
                       "command": ["python3", "-m", "dynamo.frontend"],
                       "args": ["--http-port", str(FRONTEND_PORT)]}]}}}]
    config = {}
    for pool, (roles, replicas, size) in pools.items():
        head = next(c for r, c in roles if get(engine).command in c and "worker" not in r)
        args, options = _args(engine, head, pool)
        hosts = nodes(size, per_host)
        # a variable the user sets: Kubernetes expands $(NAME) in args from the container's env
        users = [v for v in USER_VARS if any(f"${v}" in a for a in args)]
        args = [_k8s_vars(a, users) for a in args]
        container = {"name": "main", "image": image, "workingDir": WORKDIR[engine],
                     "command": ["python3", "-m", MODULE[engine]], "args": args,
                     "resources": {"limits": {"nvidia.com/gpu": str(size // hosts)}}}
        if users:
            container["env"] = [{"name": v, "value": f"SET-{v}"} for v in users]
        pod = {"containers": [container]}
        if engine == "trtllm":
            text = "\n".join(options + _yaml_lines(roles)) + "\n"
            for v in USER_VARS:       # no shell reads a ConfigMap: the value goes in by hand
                text = text.replace(f"${v}", f"SET-{v}")
            config[f"{pool or 'engine'}.yaml"] = text
            container["volumeMounts"] = [{"name": "lts-config", "mountPath": CONFIG_DIR,
                                          "readOnly": True}]
            pod["volumes"] = [{"name": "lts-config", "configMap": {"name": f"{name}-config"}}]
        comp = {"name": pool or "worker", "type": pool or "worker", "replicas": replicas,
                "podTemplate": {"spec": pod}}
        if hosts > 1:
            comp["multinode"] = {"nodeCount": hosts}
        components.append(comp)
    out = [{"apiVersion": API, "kind": "DynamoGraphDeployment",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "lts"}},
            "spec": {"backendFramework": engine, "components": components}}]
    if config:
        out.insert(0, {"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": f"{name}-config"}, "data": config})
    return out
