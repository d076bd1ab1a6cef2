"""How lts writes one engine's command lines: the ``Launcher`` each engine's launch module
(``vllm``, ``sglang``, ``trtllm``) subclasses, and what their commands share.

A launcher turns a strategy row the engine runs into its instance commands (``command``), and
for a two-pool deployment adds the engine's disaggregation flags to an instance command
(``disagg_command``), writes the pools' config files (``pool_files``), one command per node
where the engine needs it (``node_commands``), the router in front (``router``) and a note on
the KV transport (``transport_note``). What the engine is (its release, its flags' sources, what
it runs) is ``lts.engines``; ``emit`` and ``emit_disagg`` call the launcher of the engine named.
"""
from __future__ import annotations

import math
import re
import shlex

HEAD_IP, NODE_RANK = "$HEAD_IP", "$NODE_RANK"        # shell variables the user sets per node
ROUTER_PORT = 8000            # what clients of a two-pool deployment call


def plain(x: float) -> str:
    """A number as a flag value: at most 4 decimals, no exponent, no trailing zeros."""
    return f"{x:.4f}".rstrip("0").rstrip(".")


def eplb_placement(model, ep_size: int, engine: str) -> tuple:
    """(runs, notes) for a MoE ``model`` deployed with the expert-parallel load balancer
    (``FFNSpec.eplb``, its ``redundant_experts``): whether the engine's flags for it go into a
    command whose MoE expert-parallel size is ``ep_size``, and the notes that say why not or what
    the engine requires (``engine``: its name in sentences). Every engine balances experts only
    over expert-parallel ranks, and shards ``slots`` expert copies evenly over them."""
    f = model.ffn
    if not (model.is_moe and f.eplb):
        return False, []
    what = (f"EPLB with {f.redundant_experts} redundant expert{'s' if f.redundant_experts != 1 else ''}"
            if f.redundant_experts else "EPLB")
    if ep_size <= 1:
        return False, [f"{what} not written: {engine} balances experts over expert-parallel "
                       "ranks, and this strategy has none (lts costed the busiest rank as "
                       "balanced; without expert parallelism there is one rank, so nothing to "
                       "balance)"]
    notes = [f"{what}: {f.slots} expert copies over {ep_size} expert-parallel ranks, "
             f"{f.slots // ep_size if f.slots % ep_size == 0 else f.slots / ep_size:g} on each"]
    if f.slots % ep_size:
        notes.append(f"{engine} needs the {f.slots} expert copies to divide evenly over its "
                     f"{ep_size} expert-parallel ranks: this command will not start; pick "
                     "--redundant-experts so that experts + redundant is a multiple of it")
    return True, notes


class Launcher:
    """One engine's command lines (subclassed per engine; the defaults are the common case)."""
    name = ""                 # the engine's name in lts.engines
    instance_file = ""        # a config file an instance's commands write ("": none); a two-pool
                              # deployment writes its pools' files instead (pool_files)
    spec_on_prefill = False   # two pools with speculative decoding: the prefill instances run
                              # the draft too (its first step's input goes to the decode side)

    def command(self, model, topo, work, row, ref: str, extra: list, max_len: int, key=None,
                serve=None, yaml=()) -> tuple:
        """(list of (role, command), notes) that run ``row`` on one instance: ``ref`` the model
        as the engine loads it, ``extra`` flags to append, ``max_len`` the limit on a request's
        tokens, ``key`` the shipped model's short name, ``serve`` the ServeProblem of the serve
        phase (else None), ``yaml`` lines for the instance's options file (``spec_flags``)."""
        raise NotImplementedError

    def spec_flags(self, method: str, k: int, draft) -> tuple:
        """(flags, YAML lines of the instance's options file, notes) that run speculative
        decoding (``serving.spec``): ``method`` mtp, eagle or draft, ``k`` drafted tokens a
        step, ``draft`` the draft's reference (None for mtp)."""
        raise NotImplementedError

    def prefix_flags(self) -> tuple:
        """(flags, note) for prefix caching, on by default in every engine lts launches."""
        raise NotImplementedError

    def offload_flags(self, host_bytes: float, model, row) -> tuple:
        """(flags, YAML lines of the instance's options file, note) that give each GPU of
        strategy ``row`` ``host_bytes`` of host memory for the KV cache (--kv-offload,
        ``serving.offload``)."""
        raise NotImplementedError

    def policy_flags(self, profile) -> tuple:
        """(flags, note): the scheduling the serve phase costs (``profile``, the engine profile
        on this GPU: tokens per step, whether prefill chunks share a step with decodes, the KV
        pool's share of memory) set in the command, not left to the release's defaults."""
        raise NotImplementedError

    def disagg_command(self, pool: str, cmd: str, first: int, size: int, port: int, k: int,
                       host: str, one_node: bool) -> str:
        """An instance command of the ``pool`` (prefill/decode) with the engine's disaggregation
        flags: its first GPU on the node, its size, its port, its index k in the pool, the
        address of the node it runs on, whether it fits one node."""
        raise NotImplementedError

    def router(self, endpoints: dict, head: str):
        """The router's command: endpoints {pool: [(host, port, bootstrap port)]}; or a list of
        (role, command) when it needs a config file written first."""
        raise NotImplementedError

    def transport_note(self) -> str:
        """How the KV cache moves between the pools, and what to install for it."""
        raise NotImplementedError

    def pool_files(self, problem, launches: dict, own: dict) -> list:
        """(role, command) that write the pools' config files before any instance starts;
        ``own``: {pool: the lines of its instances' own config file (``instance_file``)}."""
        return []

    def file_lines(self, roles: list) -> list:
        """The lines an instance's commands write to its own config file (``instance_file``)."""
        for _, cmd in roles:
            f = written(cmd)
            if f and f[0] == self.instance_file:
                return f[1]
        return []

    def node_commands(self, roles: list, node: int, span: int, host) -> list:
        """(role, command, the address of the node it runs on) of one instance's commands, its
        head on its first node ``node``: the head's address as that node's."""
        return [(role, cmd.replace(HEAD_IP, f"$NODE{node}_IP"), host(node)) for role, cmd in roles]


def nodes(gpus: int, per_node: int) -> int:
    """Nodes for one instance: the fewest that split it evenly with at most per_node each."""
    n = max(1, math.ceil(gpus / per_node))
    while gpus % n:
        n += 1
    return n


def workers(n: int) -> str:
    """The role of the nodes other than the head."""
    return "the worker node (NODE_RANK=1)" if n == 2 else f"each worker node (NODE_RANK=1..{n - 1})"


def join(*parts) -> str:
    return " ".join(str(p) for p in parts if p not in (None, ""))


def printf(lines, path: str) -> str:
    """A shell command that writes ``lines`` to ``path``: printf turns each \\n into a line
    break; in double quotes, so that the $NODEk_IP in them expand (the lines hold no other
    character the shell reads there: ``command_dict`` reads them back)."""
    return 'printf "' + "\\n".join(lines) + '\\n" > ' + path


# a shell variable the user (or the deployment file) sets: $NAME, or arithmetic $((...))
VARIABLE = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*|\(\()")
PRINTF = re.compile(r'printf "(.*)\\n" > (\S+)\Z', re.S)
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
ASSIGN_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=\S* ")     # one, in a command's text


def quote(arg: str) -> str:
    """``arg`` as one shell word, as it must reach the engine: single-quoted where the shell would
    read it otherwise (``shlex.quote``), and in double quotes where it holds a variable the user
    sets ($EAGLE3_DRAFT inside a JSON option), so that the shell expands that and nothing
    else."""
    if not VARIABLE.search(arg):
        return shlex.quote(arg)
    return '"' + re.sub(r'([\\"`])', r"\\\1", arg) + '"'


def words(cmd: str) -> list:
    """The shell words of ``cmd`` as written (quotes kept): split at the blanks outside quotes,
    so that joining them with single spaces gives ``cmd`` back where it has no double blank."""
    out, word, q, i = [], "", "", 0
    while i < len(cmd):
        c = cmd[i]
        if c == "\\" and q != "'" and i + 1 < len(cmd):
            word, i = word + cmd[i:i + 2], i + 2
            continue
        if q:
            q = "" if c == q else q
        elif c in "'\"":
            q = c
        elif c == " ":
            if word:
                out.append(word)
            word, i = "", i + 1
            continue
        word, i = word + c, i + 1
    return out + ([word] if word else [])


def split_env(cmd: str) -> tuple:
    """(the ``NAME=value`` assignments before a command's program, the rest of the command)."""
    env = []
    while (m := ASSIGN_WORD.match(cmd)):
        env.append(m.group(0).strip())
        cmd = cmd[m.end():]
    return env, cmd


def written(cmd: str):
    """(path, lines) of a command that writes a config file (``printf``), else None."""
    m = PRINTF.match(cmd)
    return (m.group(2), m.group(1).split("\\n")) if m else None


def command_dict(role: str, cmd: str) -> dict:
    """One command as ``--json`` carries it: its role and shell text, and either the file it
    writes (``file``: path and content, variables left for the shell) or the program's argument
    list as the shell passes it (``argv``, variables unexpanded) with the environment it sets
    before the program (``env``)."""
    f = written(cmd)
    if f:
        return {"role": role, "command": cmd,
                "file": {"path": f[0], "content": "\n".join(f[1]) + "\n"}}
    words = shlex.split(cmd)
    env = {}
    while words and ASSIGNMENT.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    return {"role": role, "command": cmd, "env": env, "argv": words}


EAGLE_DRAFT = "$EAGLE3_DRAFT"     # the EAGLE-3 head's checkpoint: the user sets it
USER_VARS = ("CHECKPOINT", "EAGLE3_DRAFT")   # variables the notes ask the user to set


def k8s_name(text: str) -> str:
    """A Kubernetes object name (RFC 1123 label: lowercase letters, digits and '-', at most 63
    characters, starting and ending with a letter or digit) made of ``text``."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return name[:63].rstrip("-") or "lts"



def speculation(serve, ref_of) -> tuple:
    """(method, k, draft reference or None) of a serve problem's speculative decoding, or None
    (``serving.spec``): the draft of ``draft:MODEL`` as the engine loads it (``ref_of``), an
    EAGLE-3 head's path the user sets (EAGLE_DRAFT)."""
    spec = getattr(serve, "spec", None) if serve is not None else None
    if spec is None:
        return None
    draft = ref_of(spec.draft_key) if spec.method == "draft" else \
        EAGLE_DRAFT if spec.method == "eagle" else None
    return spec.method, spec.tokens, draft


def spec_notes(serve) -> list:
    """What the commands assume of speculative decoding and prefix caching (both engines'
    defaults or flags, in each launcher)."""
    out = []
    spec = getattr(serve, "spec", None) if serve is not None else None
    if spec is not None and spec.method == "eagle":
        out.append(f"set {EAGLE_DRAFT} to the EAGLE-3 head trained for this model (lts costs it "
                   "as one decoder layer of the model's shape)")
    if spec is not None:
        a = (f"acceptance {spec.acceptance:g} per drafted token" if spec.acceptance is not None
             else "the measured mean")
        out.append(f"speculative decoding: {spec.tokens} drafted token"
                   f"{'s' if spec.tokens != 1 else ''} a step, lts assumes {a} "
                   f"({spec.accepted_length:.2f} tokens a step)")
    return out
