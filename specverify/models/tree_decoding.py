"""Tree drafts on real causal LMs: one target forward with a tree attention mask per round.

Contract. ``tree_generate`` returns a ``decoding.Generation`` whose tokens are distributed as
sampling from the target token by token (at temperature 0: equal to target-only greedy decoding,
up to near-ties of batched kernels, see ``decoding.compare_greedy``). Its stats count
rounds = target passes (prefill not counted), drafted = tree nodes, accepted = accepted path
length, rejections = rounds whose walk ended with every candidate at a node rejected, emitted.

One round (SpecInfer, Miao et al., arXiv 2305.09781, token-tree verification; Medusa, Cai et
al., arXiv 2401.10774, tree attention):

1. Draft. The draft model feeds the committed tokens it lacks; its last row is q at the root.
   ``width`` candidates are drawn there (greedy: the top-``width`` of q; T > 0: i.i.d. from q or,
   by default, without replacement). Every node to be expanded is then fed, one batched draft
   forward per level with the tree mask below, giving q at that node and its ``width`` children.
   ``shape="full"`` expands every node above depth k (width + width^2 + ... + width^k nodes,
   k draft forwards of 1, width, width^2, ... rows); ``shape="spine"`` expands only the first
   candidate of each node (a chain with width - 1 sibling alternatives per level: width * k
   nodes, each draft forward one row, as the chain's).
2. Verify. The target feeds its pending committed tokens and every node in ONE forward. The
   phase tokens (pending chain, then nodes in level order) take cache slots past_len.. in feed
   order; the float mask [1, 1, n_new, past_len + n_new] is 0 where a token may attend (every
   slot before past_len, its own ancestors in the phase, itself) and the dtype's minimum
   elsewhere; ``position_ids`` are past_len + (number of phase ancestors), i.e. a node's depth
   past the root. transformers 5.x returns a 4-D mask as-is (``masking_utils``
   ``_preprocess_mask_arguments``), so sdpa and eager attention add it to the scores; the
   DynamicCache just appends the new keys and values. Row r of the logits is then the target's
   distribution after the root-to-node path of token r (``tests/test_models_tree.py`` checks
   this against separate forwards to 1e-4).
3. Walk. From the root, the candidates of the current node are checked with
   ``samplers.tree.verify_siblings`` (recursive rejection sampling) on the identically
   processed p and q rows; an accepted candidate is descended into; the round emits the path
   plus a residual token (all candidates rejected) or a bonus token from p (a node without
   children). At T = 0 a candidate is accepted when it is the target's argmax
   (``samplers.greedy.greedy_node``).
4. Crop. Both caches keep the committed slots and the accepted path's slots, gathered along the
   sequence dimension (``keep_slots``), so they again hold exactly the output's prefix.

Why it is exact. At every node the walk reaches, its candidates were drawn from q at that
node's prefix by the scheme ``verify_siblings`` assumes, with draft randomness independent of
the acceptance draws; ``verify_siblings`` draws its candidates from its rng, so they are handed
over through ``ReplayRng``, which answers the candidate draws with the pre-drawn tokens (the same
joint law) and passes every other draw to the real rng. Given the history, the next token is then
p-distributed (``samplers/tree`` docstring's induction), and at a node without children the bonus
is drawn from p itself, so the tree's shape may depend on the drafts (the spine) without bias.
At T = 0 the candidates are the top-``width`` of q, ties to the lowest id, so the chain's draft
(q's argmax at each level) is the spine of both shapes: per round from one context the tree
accepts at least as many tokens as the chain.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..common.validation import check_k
from ..laws.processing import check_sampling, process_logits
from ..samplers.greedy import greedy_node
from ..samplers.tree import check_width, verify_siblings, without_token
from . import decoding, model_calls
from .loading import torch_modules

SHAPES = ("full", "spine")


# ---------------------------------------------------------------------------- the tree


@dataclass
class Node:
    """One drafted token. ``parent`` is a node index, -1 for the root (the last committed token)."""

    token: int
    parent: int
    depth: int
    children: list[int] = field(default_factory=list)
    q: np.ndarray | None = None  # draft distribution at this node's prefix, once fed (T > 0)
    expand: bool = False


@dataclass
class Tree:
    nodes: list[Node] = field(default_factory=list)
    root_children: list[int] = field(default_factory=list)
    root_q: np.ndarray | None = None

    def children_of(self, parent: int) -> list[int]:
        return self.root_children if parent < 0 else self.nodes[parent].children

    def add(self, token: int, parent: int) -> int:
        depth = 1 if parent < 0 else self.nodes[parent].depth + 1
        self.nodes.append(Node(int(token), parent, depth))
        self.children_of(parent).append(len(self.nodes) - 1)
        return len(self.nodes) - 1


def check_shape(shape) -> str:
    if shape not in SHAPES:
        raise ValueError(f"shape: must be one of {SHAPES}, got {shape!r}")
    return shape


# ---------------------------------------------------------------------------- mask and forward


def ancestor_matrix(parents: list[int]) -> np.ndarray:
    """Boolean [n, n]: entry (i, j) is True when j is i or an ancestor of i (parents[i] < i, -1 none)."""
    n = len(parents)
    seen = np.zeros((n, n), dtype=bool)
    for i, parent in enumerate(parents):
        if not -1 <= parent < i:
            raise ValueError(f"parents: entry {i} must lie in -1..{i - 1}, got {parent}")
        if parent >= 0:
            seen[i] = seen[parent]
        seen[i, i] = True
    return seen


def tree_mask(n_past: int, parents: list[int], start: int, dtype, device):
    """Float mask [1, 1, n_new, n_past + len(parents)] for feeding phase tokens start.. :
    0 on every past slot and on the token's phase ancestors and itself, dtype's minimum elsewhere."""
    torch, _ = torch_modules()
    seen = ancestor_matrix(parents)[start:]
    allowed = np.concatenate([np.ones((len(seen), n_past), dtype=bool), seen], axis=1)
    mask = torch.full(allowed.shape, torch.finfo(dtype).min, dtype=dtype, device=device)
    mask[torch.as_tensor(allowed, device=device)] = 0.0
    return mask[None, None]


def tree_positions(n_past: int, parents: list[int], start: int) -> list[int]:
    """Position id of each new phase token: n_past + its number of phase ancestors."""
    return [n_past + int(count) - 1 for count in ancestor_matrix(parents)[start:].sum(axis=1)]


def tree_forward(model, tokens: list[int], parents: list[int], start: int, cache):
    """float32 logits [len(parents) - start, vocab] of feeding phase tokens ``start..`` after the
    cache, which holds n_past committed slots then phase tokens ``..start - 1`` in phase order.

    ``parents`` covers the whole phase (entries < start are already cached); ``tokens`` are the
    new ones only.
    """
    torch, _ = torch_modules()
    n_new = len(parents) - start
    if len(tokens) != n_new:
        raise ValueError(f"tokens: expected {n_new} new tokens for parents[{start}:], got {len(tokens)}")
    n_past = model_calls.cache_length(cache) - start
    if n_past < 0:
        held = model_calls.cache_length(cache)
        raise ValueError(f"start: the cache holds {held} slots, fewer than start={start}")
    device, dtype = model.device, model.dtype
    ids = torch.tensor([tokens], dtype=torch.long, device=device)
    pos = torch.tensor([tree_positions(n_past, parents, start)], dtype=torch.long, device=device)
    mask = tree_mask(n_past, parents, start, dtype, device)
    out = model(
        input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, **{model_calls.cache_kwarg(model): cache}
    )
    return out.logits[0].float()


def chain_parents(n: int) -> list[int]:
    """Phase parents of n committed tokens fed in order: each sees the one before."""
    return list(range(-1, n - 1))


# ---------------------------------------------------------------------------- drafting


def draw_candidates(q: np.ndarray, width: int, rng, without_replacement: bool) -> list[int]:
    """``width`` tokens from q, i.i.d. or without replacement (fewer if q's support runs out):
    the draws ``verify_siblings`` would make itself."""
    out = []
    for _ in range(width):
        x = int(rng.choice(len(q), p=q))
        out.append(x)
        if without_replacement:
            q = without_token(q, x)
            if q is None:
                break
    return out


def top_candidates(row, width: int) -> list[int]:
    """Greedy candidates: the ``width`` largest logits, ties to the lowest id (first = argmax)."""
    values = row.cpu().numpy()
    return [int(i) for i in np.argsort(-values, kind="stable")[:width]]


@dataclass
class Sampling:
    """How a round draws: the processing applied alike to p and q (temperature 0 = greedy), the
    candidates per node (``width``), how many logits are compared (``vocab``), the rng, and the
    sibling scheme (without replacement, or i.i.d.)."""

    temperature: float
    top_k: int | None
    top_p: float | None
    width: int
    vocab: int
    rng: object
    without_replacement: bool = True

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def probs(self, row) -> np.ndarray:
        return process_logits(row.cpu().numpy(), self.temperature, self.top_k, self.top_p)


def _candidates_at(row, sampling: Sampling) -> tuple[list[int], np.ndarray | None]:
    if sampling.greedy:
        return top_candidates(row, sampling.width), None
    q = sampling.probs(row)
    return draw_candidates(q, sampling.width, sampling.rng, sampling.without_replacement), q


def _expand(tree: Tree, parent: int, row, sampling: Sampling, shape: str, last_level: bool) -> list[int]:
    """Add the children of ``parent`` drawn from the draft row; mark which will be expanded."""
    tokens, q = _candidates_at(row, sampling)
    if parent < 0:
        tree.root_q = q
    else:
        tree.nodes[parent].q = q
    children = [tree.add(x, parent) for x in tokens]
    for i, child in enumerate(children):
        tree.nodes[child].expand = not last_level and (shape == "full" or i == 0)
    return children


def draft_tree(draft, pending: list[int], cache, k: int, sampling: Sampling, shape: str):
    """Draft a depth-k tree after feeding ``pending``: (tree, draft phase slot of each fed node).

    One draft forward per level: the pending tokens (their last row is q at the root), then the
    nodes of each level that will be expanded, in one batch under the tree mask.
    """
    tree = Tree()
    parents = chain_parents(len(pending))
    row = model_calls.forward(draft, pending, cache)[-1, : sampling.vocab]
    level = _expand(tree, -1, row, sampling, shape, k == 1)
    slot = {}
    for depth in range(2, k + 1):
        fed = [n for n in level if tree.nodes[n].expand]
        if not fed:
            break
        start = len(parents)
        for n in fed:
            parent = tree.nodes[n].parent
            slot[n] = len(parents)
            parents.append(len(pending) - 1 if parent < 0 else slot[parent])
        rows = tree_forward(draft, [tree.nodes[n].token for n in fed], parents, start, cache)
        rows = rows[:, : sampling.vocab]
        level = [c for n, r in zip(fed, rows) for c in _expand(tree, n, r, sampling, shape, depth == k)]
    return tree, slot


# ---------------------------------------------------------------------------- verification


class ReplayRng:
    """An rng for ``verify_siblings`` whose first ``choice`` calls return pre-drawn candidates.

    verify_siblings draws each candidate with ``rng.choice(len(q), p=q)`` just before checking
    it; the tree drafted them earlier from the same q by the same scheme, so answering those
    draws with the drafted tokens leaves the joint law unchanged. Later ``choice`` calls (the
    residual draw) and every ``random`` call go to the real rng. ``last`` is the index of the
    candidate most recently handed out.
    """

    def __init__(self, rng, candidates: list[int]):
        self.rng, self.candidates, self.last = rng, list(candidates), -1

    def choice(self, n, p=None):
        if self.last + 1 < len(self.candidates):
            self.last += 1
            x = self.candidates[self.last]
            if p is not None and not p[x] > 0:
                raise ValueError(f"candidates: token {x} has probability 0 where it is replayed")
            return x
        return self.rng.choice(n, p=p)

    def random(self):
        return self.rng.random()


def _node_step_greedy(row, tree: Tree, children: list[int]):
    i, best = greedy_node(row, [tree.nodes[c].token for c in children])
    return (None if i is None else children[i]), best


def _node_step_sampled(p, q, tree: Tree, children: list[int], sampling: Sampling):
    replay = ReplayRng(sampling.rng, [tree.nodes[c].token for c in children])
    accepted, token = verify_siblings(p, q, len(children), replay, sampling.without_replacement)
    return (children[replay.last] if accepted else None), token


def walk_tree(tree: Tree, rows, sampling: Sampling) -> tuple[list[int], int, bool]:
    """(accepted path node indices, the token emitted after them, whether a node rejected all).

    ``rows[0]`` is the target's row at the root, ``rows[1 + i]`` at node i.
    """
    path, node = [], -1
    while True:
        children = tree.children_of(node)
        if sampling.greedy:
            child, token = _node_step_greedy(rows[node + 1], tree, children)
        else:
            p = sampling.probs(rows[node + 1])
            if not children:
                return path, int(sampling.rng.choice(len(p), p=p)), False
            q = tree.root_q if node < 0 else tree.nodes[node].q
            child, token = _node_step_sampled(p, q, tree, children, sampling)
        if child is None:
            return path, token, bool(children)
        path.append(child)
        node = child


# ---------------------------------------------------------------------------- generation


@dataclass
class TreeState:
    """Both caches and how many of ``ids`` each holds (the target's: all but the last token)."""

    t_cache: object
    d_cache: object
    t_len: int = 0
    d_len: int = 0

    def rewind(self, length: int) -> None:
        """Forget everything past the first ``length`` tokens (to reuse one prefill)."""
        if not 0 <= length <= self.t_len:
            raise ValueError(f"length: must lie in 0..{self.t_len}, got {length}")
        self.t_len, self.d_len = length, min(self.d_len, length)
        model_calls.crop_to(self.t_cache, self.t_len)
        model_calls.crop_to(self.d_cache, self.d_len)


def prefill(target, draft, ids: list[int]) -> TreeState:
    """Fresh caches holding all of ``ids`` but the last token (the round feeds that one)."""
    state = TreeState(model_calls.new_cache(target), model_calls.new_cache(draft))
    if len(ids) > 1:
        model_calls.forward(target, ids[:-1], state.t_cache)
        model_calls.forward(draft, ids[:-1], state.d_cache)
        state.t_len = state.d_len = len(ids) - 1
    return state


def _target_rows(target, ids, state: TreeState, tree: Tree, vocab: int):
    """One target forward over the pending tokens and every node: rows at the root, then nodes."""
    pending = ids[state.t_len :]
    root = len(pending) - 1
    parents = chain_parents(len(pending)) + [root if n.parent < 0 else len(pending) + n.parent for n in tree.nodes]
    tokens = pending + [n.token for n in tree.nodes]
    return tree_forward(target, tokens, parents, 0, state.t_cache)[root:, :vocab]


def _crop_to_path(state: TreeState, n_target_pending: int, n_draft_pending: int, path, d_slot) -> None:
    base = state.t_len + n_target_pending
    model_calls.keep_slots(state.t_cache, list(range(base)) + [base + n for n in path])
    fed_path = [state.d_len + d_slot[n] for n in path if n in d_slot]  # the leaf may not be fed
    keep_d = list(range(state.d_len + n_draft_pending)) + fed_path
    model_calls.keep_slots(state.d_cache, keep_d)
    state.t_len += n_target_pending + len(path)
    state.d_len = len(keep_d)


def tree_round(
    target, draft, ids: list[int], state: TreeState, k: int, sampling: Sampling, shape: str, stats: decoding.DecodeStats
) -> list[int]:
    """One round after ``ids`` (whose caches ``state`` holds): draft a tree, verify it in one
    target pass, walk it, crop both caches to the path. Returns the emitted tokens (accepted
    path then one more) and updates ``stats``; call it under ``torch.no_grad()``."""
    n_t, n_d = len(ids) - state.t_len, len(ids) - state.d_len
    tree, d_slot = draft_tree(draft, ids[state.d_len :], state.d_cache, k, sampling, shape)
    rows = _target_rows(target, ids, state, tree, sampling.vocab)
    path, token, rejected = walk_tree(tree, rows, sampling)
    _crop_to_path(state, n_t, n_d, path, d_slot)
    stats.rounds += 1
    stats.drafted += len(tree.nodes)
    stats.accepted += len(path)
    stats.rejections += rejected
    stats.emitted += len(path) + 1
    return [tree.nodes[n].token for n in path] + [int(token)]


def tree_generate(
    target,
    draft,
    input_ids,
    k,
    max_new_tokens,
    width=2,
    temperature=0.0,
    top_k=None,
    top_p=None,
    rng=None,
    vocab_size=None,
    eos_token_id=None,
    *,
    shape="full",
    without_replacement=True,
) -> decoding.Generation:
    """Tree speculative decoding of depth k with ``width`` candidates per node (module docstring).

    ``shape``: "full" (every node above depth k has ``width`` children) or "spine" (only each
    node's first candidate is expanded). ``without_replacement``: at T > 0 draw siblings without
    replacement (Jeon et al., arXiv 2402.14160) or i.i.d. (SpecInfer); greedy always takes the
    top-``width`` of q. Invariant between rounds as in ``decoding.speculative_generate``: the
    target cache holds every token but the last, the draft cache a prefix of that.
    """
    torch, _ = torch_modules()
    k, width, shape = check_k(k), check_width(width), check_shape(shape)
    t, top_k, top_p = check_sampling(temperature, top_k, top_p)
    n_new = check_k(max_new_tokens, "max_new_tokens")
    ids = model_calls.prompt_list(input_ids)
    vocab = min(model_calls.logit_width(target, vocab_size), model_calls.logit_width(draft, vocab_size))
    sampling = Sampling(t, top_k, top_p, width, vocab, decoding.as_rng(rng), bool(without_replacement))
    n_prompt, stats = len(ids), decoding.DecodeStats()
    with torch.no_grad():
        model_calls.synchronize(target)
        start = time.perf_counter()
        state = prefill(target, draft, ids)
        while len(ids) - n_prompt < n_new and eos_token_id not in ids[n_prompt:]:
            ids += tree_round(target, draft, ids, state, k, sampling, shape, stats)
        model_calls.synchronize(target)
        stats.wall_s = time.perf_counter() - start
    return decoding.Generation(decoding.finish_ids(ids, n_prompt, n_new, eos_token_id), n_prompt, stats)


# ---------------------------------------------------------------------------- measurement


def _sum_stats(parts) -> decoding.DecodeStats:
    total = decoding.DecodeStats()
    for s in parts:
        for name in ("rounds", "drafted", "accepted", "rejections", "emitted", "wall_s"):
            setattr(total, name, getattr(total, name) + getattr(s, name))
    return total


def measure_tree(pair, prompts, k, width, max_new_tokens, temperature=0.0, *, shape="full", rng=0, chain=True) -> dict:
    """Tree decoding (and, with ``chain``, the chain ``decoding.speculative_generate`` at the same
    depth k) over ``prompts`` (texts or token lists) on a ``loading.ModelPair``: summed stats of
    each as ``DecodeStats.as_dict()`` rows, for ``measure.py``'s table."""
    rng = decoding.as_rng(rng)
    encoded = [pair.tokenizer.encode(p) if isinstance(p, str) else list(p) for p in prompts]
    common = dict(temperature=temperature, vocab_size=pair.vocab_size, eos_token_id=pair.eos_token_id)
    trees = [
        tree_generate(pair.target, pair.draft, ids, k, max_new_tokens, width, rng=rng, shape=shape, **common).stats
        for ids in encoded
    ]
    total = _sum_stats(trees)
    out = {
        "tree": dict(
            total.as_dict(), k=k, width=width, shape=shape, nodes_per_round=total.drafted / max(1, total.rounds)
        )
    }
    if chain:
        chains = [
            decoding.speculative_generate(pair.target, pair.draft, ids, k, max_new_tokens, rng=rng, **common).stats
            for ids in encoded
        ]
        out["chain"] = dict(_sum_stats(chains).as_dict(), k=k)
    return out
