"""Tokens per round and modelled speedup of the samplers beyond the single chain.

``python -m specverify.bench.compare_samplers [--json] [--out docs/SAMPLERS.md]``

For every model and cost ratio c in ``COST_RATIOS`` it compares the single chain at its best
fixed k, the two tree rules at their best depth, confidence stopping at its best maximum k,
adaptive k (AdaptiveK, which picks k itself up to ``ADAPTIVE_MAX_K``) and, on the copy-heavy
model, prompt lookup against a model drafter.

Cost model. A round costs one target pass plus one draft-model call per draft step:
speedup = E[tokens per round] / (E[draft calls per round] * c + 1), the handout's
E[tokens] / (k c + 1) with k replaced by the draft calls actually made (a ratio of long-run
means, i.e. the renewal-reward rate). Draft calls are counted as the calls the sampler makes
to q_fn, except for trees: a real engine drafts the whole tree up front with one batched draft
call per level (tree attention, memory-bound at batch 1, so a level costs about one call), so a
depth-k tree costs k calls however many of its width + ... + width^k nodes get verified (the
column ``draft_tokens`` gives the tree size). Confidence stopping pays for the call that looked
at the low-confidence q. Prompt lookup makes no draft calls (c plays no role). Verifying more
positions in one target pass is taken to be free, which holds at batch 1 only.

Tokens per round, "exact": for a stateless sampler on a table model of order o, the round-start
state (the last o tokens) is a Markov chain whose kernel comes from the exact round
distribution (specverify.laws.exact); the long-run tokens and draft calls per round are their
expectations under its stationary distribution, computed from the prompt's state by Cesaro
averaging. "simulated": AdaptiveK carries estimates across rounds and prompt lookup reads the
whole prefix, so they (and anything over ``MAX_PATHS`` paths) are simulated: ``SEQUENCES``
independent sequences of ``ROUNDS`` rounds each; the standard error is that of the mean of
the per-sequence means.

Beyond the token-wise rule (``compare_rules``, a second table and docs/figures/rules.png): on
the same models and draft budgets (k drafts in a chain; a width-2 tree of depth k), the token-wise
chain, block verification (arXiv 2403.10444), the two tree rules, SpecTr's k-SEQ (arXiv
2310.15141), the canonical optimal-transport rule (arXiv 2410.18234) and traversal verification
of the same two trees (arXiv 2505.12398), each at the same k, with the oracle: for a chain, block verification's tokens per round is the optimum over exact
verifiers (its Theorem 2); for one node with 2 i.i.d. drafts, the transport LP's optimal
acceptance (specverify.laws.optimal_acceptance), which the canonical rule reaches.

References: Leviathan et al. arXiv 2211.17192 (rule, speedup model); SpecInfer arXiv 2305.09781
and RSD arXiv 2402.14160 (trees); SpecDec++ arXiv 2405.19715 (confidence stopping); prompt lookup
decoding (github.com/apoorvumang/prompt-lookup-decoding).

"""

from __future__ import annotations

import functools
import itertools
import json
import sys
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..laws.chains import TableModel, handout_iid, toy_chain
from ..samplers.adaptive import AdaptiveK, confidence_step
from ..samplers.block import block_step
from ..samplers.chain import speculative_step
from ..samplers.prompt_lookup import prompt_lookup_step
from ..samplers.transport import canonical_step, spectr_step
from ..samplers.traversal import traversal_step
from ..samplers.tree import tree_nodes, tree_step
from .long_run import measure, speedup

if TYPE_CHECKING:  # polars is imported where it is used: a usage error need not load it
    import polars as pl

COST_RATIOS = (0.05, 0.32)
K_RANGE = range(1, 9)
TREE_WIDTH = 2
TREE_K_RANGE = range(1, 6)
CONFIDENCE_THRESHOLD = 0.5
ADAPTIVE_MAX_K = 8
LOOKUP_K = 8


# ---------------------------------------------------------------------------------------------
# models
# ---------------------------------------------------------------------------------------------


def context_varying_chain() -> TableModel:
    """First-order chain on 4 tokens: alpha 0.95 after tokens 0 and 1, 0.2 after 2 and 3.

    After 0 / 1 the draft is confident (max q 0.7) and nearly right; after 2 / 3 it is unsure
    (max q 0.35) and wrong. The target stays in a regime with probability 0.9 (high) and 0.95
    (low), so rounds see long stretches of either.
    """
    p = [[0.75, 0.15, 0.05, 0.05], [0.15, 0.75, 0.05, 0.05],
         [0.00, 0.05, 0.85, 0.10], [0.05, 0.00, 0.10, 0.85]]  # fmt: skip
    q = [[0.70, 0.15, 0.05, 0.10], [0.15, 0.70, 0.10, 0.05],
         [0.35, 0.30, 0.05, 0.30], [0.30, 0.35, 0.30, 0.05]]  # fmt: skip
    return TableModel(p, q, order=1, name="context-varying")


COPY_VOCAB = 5


def copy_successor(a: int, b: int) -> int:
    """The token the copy-heavy chain prefers after (a, b)."""
    return (a + b + 1) % COPY_VOCAB


def copy_heavy_chain(target_copy: float = 0.9, draft_copy: float = 0.6) -> TableModel:
    """Second-order chain that repeats its prompt: after (a, b) the target puts
    ``target_copy`` + (1 - target_copy) / V on ``copy_successor(a, b)`` and the rest uniformly;
    the draft model does the same with ``draft_copy`` (alpha 0.76 with the defaults).

    The prompt (``copy_heavy_prompt``) follows the successor rule, so the continuation of the
    last bigram's earlier occurrence is the target's favourite token.
    """
    v = COPY_VOCAB
    p, q = np.zeros((v * v, v)), np.zeros((v * v, v))
    for a, b in itertools.product(range(v), repeat=2):
        row = a * v + b  # TableModel's context index of a prefix ending in (a, b)
        nxt = copy_successor(a, b)
        p[row] = (1 - target_copy) / v
        q[row] = (1 - draft_copy) / v
        p[row, nxt] += target_copy
        q[row, nxt] += draft_copy
    return TableModel(p, q, order=2, name="copy-heavy")


def copy_heavy_prompt(length: int = 42) -> tuple[int, ...]:
    """Two periods (the rule has period 20 from (0, 0)) of the successor rule, from (0, 0)."""
    seq = [0, 0]
    while len(seq) < length:
        seq.append(copy_successor(seq[-2], seq[-1]))
    return tuple(seq)


# ---------------------------------------------------------------------------------------------
# the comparison
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    model: str
    c: float
    sampler: str
    k: int
    draft_tokens: float
    tokens_per_round: float
    se: float
    draft_calls: float
    speedup: float
    method: str


def best_fixed_k(name, sampler, model, prompt, c, k_range, tree: bool = False) -> Row:
    """The k in k_range with the highest modelled speedup at cost ratio c."""
    rows, enumerable = [], True
    for k in k_range:
        # paths grow with k: once a k needed simulation, the larger ones do too
        m = measure(sampler, model, prompt, k, try_exact=enumerable, fixed_calls=k if tree else None)
        enumerable = m.method == "exact"
        size = tree_nodes(TREE_WIDTH, k) if tree else m.draft_calls
        rows.append(Row(model.name, c, name, k, size, m.tokens, m.se, m.draft_calls, speedup(m, c), m.method))
    return max(rows, key=lambda r: r.speedup)


def fixed_row(name, sampler, model, prompt, c, k, try_exact: bool) -> Row:
    m = measure(sampler, model, prompt, k, try_exact=try_exact)
    return Row(model.name, c, name, k, m.draft_calls, m.tokens, m.se, m.draft_calls, speedup(m, c), m.method)


TREE_IID = functools.partial(tree_step, width=TREE_WIDTH, without_replacement=False)
TREE_WOR = functools.partial(tree_step, width=TREE_WIDTH, without_replacement=True)
CONFIDENCE = functools.partial(confidence_step, threshold=CONFIDENCE_THRESHOLD)
LOOKUP = functools.partial(prompt_lookup_step, ngram=2)


def model_drafter_rows(model: TableModel, prompt, c: float) -> list[Row]:
    return [
        best_fixed_k("chain", speculative_step, model, prompt, c, K_RANGE),
        best_fixed_k(f"tree-iid (width {TREE_WIDTH})", TREE_IID, model, prompt, c, TREE_K_RANGE, tree=True),
        best_fixed_k(
            f"tree-without-replacement (width {TREE_WIDTH})", TREE_WOR, model, prompt, c, TREE_K_RANGE, tree=True
        ),
        best_fixed_k(f"adaptive-confidence (max q < {CONFIDENCE_THRESHOLD})", CONFIDENCE, model, prompt, c, K_RANGE),
        fixed_row("adaptive-k", AdaptiveK(cost_ratio=c), model, prompt, c, ADAPTIVE_MAX_K, try_exact=False),
    ]


def compare() -> pl.DataFrame:
    import polars as pl

    rows: list[Row] = []
    for c in COST_RATIOS:
        for model in (handout_iid(), toy_chain(), context_varying_chain()):
            rows += model_drafter_rows(model, (0,), c)
        copy_model, prompt = copy_heavy_chain(), copy_heavy_prompt()
        rows.append(best_fixed_k("chain (model drafter)", speculative_step, copy_model, prompt, c, K_RANGE))
        rows.append(
            fixed_row("prompt-lookup (no draft model)", LOOKUP, copy_model, prompt, c, LOOKUP_K, try_exact=False)
        )
    return pl.DataFrame([asdict(r) for r in rows])


RULES_CHAIN_K = range(1, 5)
RULES_TREE_K = range(1, 4)
SPECTR = functools.partial(spectr_step, width=TREE_WIDTH)
CANONICAL = functools.partial(canonical_step, width=TREE_WIDTH)
TRAVERSAL_IID = functools.partial(traversal_step, width=TREE_WIDTH, without_replacement=False)
TRAVERSAL_WOR = functools.partial(traversal_step, width=TREE_WIDTH, without_replacement=True)
RULES = (  # name, sampler, tree-shaped
    ("chain (token-wise)", speculative_step, False),
    ("block", block_step, False),
    ("tree-iid", TREE_IID, True),
    ("tree-without-replacement", TREE_WOR, True),
    ("spectr (k-SEQ)", SPECTR, True),
    ("canonical-ot", CANONICAL, True),
    ("traversal-iid", TRAVERSAL_IID, True),
    ("traversal-without-replacement", TRAVERSAL_WOR, True),
)


def rules_models() -> list[TableModel]:
    return [handout_iid(), toy_chain(), context_varying_chain()]


def compare_rules() -> pl.DataFrame:
    """Tokens per round and modelled speedup of every rule at every k (same models, same k), with
    the chain optimum (block) beside the token-wise chain: the "block / chain" column."""
    import polars as pl

    rows = []
    for model in rules_models():
        for name, sampler, tree in RULES:
            for k in RULES_TREE_K if tree else RULES_CHAIN_K:
                m = measure(sampler, model, (0,), k, fixed_calls=k if tree else None)
                draft_tokens = tree_nodes(TREE_WIDTH, k) if tree else k
                rows.append(
                    dict(
                        model=model.name,
                        rule=name,
                        k=k,
                        draft_tokens=draft_tokens,
                        tokens_per_round=m.tokens,
                        se=m.se,
                        **{f"speedup_c{c:g}": speedup(m, c) for c in COST_RATIOS},
                        method=m.method,
                    )
                )
    df = pl.DataFrame(rows)
    chain = df.filter(pl.col("rule") == "chain (token-wise)").select(
        "model", "k", pl.col("tokens_per_round").alias("chain_tokens")
    )
    return (
        df.join(chain, on=["model", "k"], how="left")
        .with_columns((pl.col("tokens_per_round") / pl.col("chain_tokens")).alias("vs_chain"))
        .drop("chain_tokens")
    )


def one_step_acceptance() -> pl.DataFrame:
    """At each model's first state: alpha, each width-2 rule's one-node acceptance, and the
    transport LP's optimum for 2 i.i.d. drafts and 2 drafts without replacement."""
    import polars as pl

    from ..laws.exact import round_length_distribution
    from ..laws.optimal_acceptance import optimal_acceptance

    rows = []
    for model in rules_models():
        prefix = (0,)
        p, q = model.p_fn(prefix), model.q_fn(prefix)
        row = dict(model=model.name, alpha=float(np.minimum(p, q).sum()))
        for name, sampler, _tree in RULES[2:6]:
            dist = round_length_distribution(sampler, model.p_fn, model.q_fn, prefix, 1)
            row[name] = dist.get(2, 0.0)
        row["optimum (2 i.i.d.)"] = optimal_acceptance(p, q, TREE_WIDTH)
        row["optimum (2 without replacement)"] = optimal_acceptance(p, q, TREE_WIDTH, False)
        rows.append(row)
    return pl.DataFrame(rows)


def plot_rules(df: pl.DataFrame, path: str) -> None:
    import matplotlib
    import polars as pl

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = df["model"].unique(maintain_order=True).to_list()
    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 3.6), sharey=False)
    for ax, model in zip(np.atleast_1d(axes), models):
        for name, _, tree in RULES:
            sub = df.filter((pl.col("model") == model) & (pl.col("rule") == name))
            ax.plot(sub["k"], sub["tokens_per_round"], marker="o", linestyle="--" if tree else "-", label=name)
        ax.set_title(model)
        ax.set_xlabel("k (chain drafts / tree depth, width 2)")
        ax.set_ylabel("tokens per round")
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].legend(fontsize=7)
    fig.suptitle("Beyond the token-wise rule: block is the chain optimum (solid), trees dashed")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _markdown_table(df: pl.DataFrame) -> str:
    import polars as pl

    shown = df.with_columns(pl.col(pl.Float64).round(4))
    with pl.Config(
        tbl_formatting="MARKDOWN",
        tbl_hide_column_data_types=True,
        tbl_hide_dataframe_shape=True,
        tbl_rows=-1,
        tbl_cols=-1,
        tbl_width_chars=400,
        fmt_str_lengths=40,
    ):
        return str(shown)


def rules_markdown(df: pl.DataFrame, acc: pl.DataFrame) -> str:
    import polars as pl

    block = df.filter(pl.col("rule") == "block")
    gains = ", ".join(
        f"{r['model']} k={r['k']}: +{100 * (r['vs_chain'] - 1):.1f}%" for r in block.iter_rows(named=True)
    )
    return (
        "## Beyond the token-wise rule\n\n"
        "Same models, same k. `vs_chain` = tokens per round / the token-wise chain's at that k. "
        "For a chain of k drafts, `block` IS the optimum over exact verifiers (arXiv 2403.10444, "
        "Theorem 2); the token-wise rule leaves `1 - 1/vs_chain` of it on the table. Trees hold "
        f"{TREE_WIDTH} + ... + {TREE_WIDTH}^k draft tokens and are priced at k draft calls.\n\n"
        f"Block verification over the token-wise chain: {gains}. It never loses (equal at k = 1, "
        "where the two rules coincide; tests/test_rules.py checks block >= chain on the battery "
        "and on generated models).\n\n"
        f"{_markdown_table(df)}\n\n"
        "Traversal verification (arXiv 2505.12398, Algorithm 3) reads the same trees as "
        "tree-iid / tree-without-replacement (width 2, depth k) and never accepts less: "
        "tests/test_rules.py checks it by enumeration on the battery and on generated models "
        "with any tree shape (the paper proves optimality for chains only, Theorem 3.4); at "
        "depth 1 the two rules coincide, and with width 1 traversal is block verification. Against "
        "canonical-ot (the per-node transport optimum for the same i.i.d. drafts) it loses on the "
        "i.i.d. models but can win on a Markov model (context-varying, k = 2).\n\n"
        "One node, width 2 (k = 1), from each model's state (0,): acceptance P(emitted token is "
        "a draft) of each rule against the transport LP's optimum. The canonical rule reaches "
        "the i.i.d. optimum; RRS (tree-iid) and SpecTr's k-SEQ stay below it (k-SEQ is within "
        "1 - 1/e of it by SpecTr's Theorem, not optimal); drafts without replacement have a "
        "higher optimum, which tree-without-replacement does not always reach.\n\n"
        f"{_markdown_table(acc)}\n\n"
        "![tokens per round of every rule](figures/rules.png)\n"
    )


def to_markdown(df: pl.DataFrame) -> str:
    import polars as pl

    shown = df.with_columns(
        pl.col("draft_tokens", "tokens_per_round", "draft_calls").round(3),
        pl.col("se").round(4),
        pl.col("speedup").round(3),
    )
    with pl.Config(
        tbl_formatting="MARKDOWN",
        tbl_hide_column_data_types=True,
        tbl_hide_dataframe_shape=True,
        tbl_rows=-1,
        tbl_cols=-1,
        tbl_width_chars=400,
    ):
        table = str(shown)
    doc = (__doc__ or "").split("\n\n", 2)
    return (
        "# Samplers beyond the single chain: tokens per round and modelled speedup\n\n"
        "Generated by `python -m specverify.bench.compare_samplers --out docs/SAMPLERS.md`.\n\n"
        f"{doc[2] if len(doc) > 2 else ''}\n\n"
        f"Tree width {TREE_WIDTH}; chain and confidence k in {K_RANGE.start}..{K_RANGE.stop - 1},"
        f" tree depth in {TREE_K_RANGE.start}..{TREE_K_RANGE.stop - 1} (best per row); "
        f"adaptive-k max k {ADAPTIVE_MAX_K}; prompt lookup k {LOOKUP_K}.\n\n"
        f"{table}\n"
    )


def main(argv=None) -> int:
    from ..common.command_line import OneLineParser, parsed
    from ..common.validation import writable_file_argument

    parser = OneLineParser(prog="specverify bench samplers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--out", type=writable_file_argument, help="write the table as markdown to this file")
    parser.add_argument(
        "--figure", default=None, help="write the rules plot here (default: figures/rules.png beside --out)"
    )
    args, code = parsed(parser.parse_args, argv)
    if args is None:  # --help, or one line of usage error
        return code
    import polars as pl

    from ..common.files import write_or_report

    df = compare()
    rules, acc = compare_rules(), one_step_acceptance()
    if args.out:
        import os

        figure = args.figure or os.path.join(os.path.dirname(args.out) or ".", "figures", "rules.png")
        os.makedirs(os.path.dirname(figure), exist_ok=True)
        plot_rules(rules, figure)
    if args.json:
        print(json.dumps(df.to_dicts(), indent=1))
    else:
        with pl.Config(tbl_rows=-1, tbl_cols=-1, tbl_width_chars=200, fmt_str_lengths=60):
            print(df)
    if args.json:
        print(json.dumps({"rules": rules.to_dicts(), "one_step": acc.to_dicts()}, indent=1))
    else:
        with pl.Config(tbl_rows=-1, tbl_cols=-1, tbl_width_chars=200, fmt_str_lengths=60):
            print(rules)
            print(acc)
    return write_or_report(
        args.out, to_markdown(df) + "\n" + rules_markdown(rules, acc), "specverify.bench.compare_samplers: --out"
    )


if __name__ == "__main__":
    sys.exit(main())
