"""Smoke test of the paper-claim replications (replications/README.md): every claim's ``--quick`` setting runs
and writes its table (with the verdict rows) and its pictures. The numbers of a quick run mean nothing; the reported
tables come from the full settings."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

REPLICATIONS = Path(__file__).resolve().parent.parent / "replications"
SCRIPTS = sorted(path for path in REPLICATIONS.glob("*.py") if path.stem not in ("common", "collect"))


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"replication_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_there_is_a_replication_per_claim():
    assert len(SCRIPTS) >= 6, [path.name for path in SCRIPTS]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.stem)
def test_quick_setting_writes_its_table_and_pictures(script, tmp_path):
    """Run with a first seed other than 0, as the rerun with seeds 3, 4, 5 does: nothing may assume seed 0."""
    table = load(script).main(["--quick", "--first_seed", "1", "--output_dir", str(tmp_path)])
    text = Path(table).read_text(encoding="utf-8")
    assert text.startswith("# "), text[:200]
    assert "--quick" in text  # the command that produced it is written above the table
    # one seed decides nothing (no interval from one run), so the quick setting always runs its one extra round
    assert "Seeds: 1, 2 (2 per setting; 1 to start with" in text, text
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(rows) >= 4, text  # a header, at least one result row, the verdict header and one verdict
    verdicts = re.findall(r"^\| .+? \| .+? \| (holds|\*\*does not hold\*\*|\*undecided\*) \| (.+?) \|", text, re.M)
    assert verdicts, text
    # every part measured per seed has its interval over both seeds ("n/a": a measurement that seeds do not change)
    assert all("n=2" in interval or interval == "n/a" for _, interval in verdicts), verdicts
    pictures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert pictures, text
    for picture in pictures:
        assert (tmp_path / picture).stat().st_size > 1000, picture


def test_word_order_task_is_told_by_the_order_of_the_words_only():
    """*word order* (BERT's and GPT-1's task): every shuffled row is a permutation of a line, not the line itself;
    the two labels draw on the same kind of lines; no line is in both splits."""
    from replications.common import word_order_rows

    train, validation = word_order_rows(quick=True)
    assert {row["label"] for row in train} == {"as written", "shuffled"}
    for rows in (train, validation):
        assert all(6 <= len(row["text"].split()) <= 14 for row in rows)
        assert all(row["text"] == row["text"].lower() and "," not in row["text"] for row in rows)
    text = (REPLICATIONS.parent / "training" / "data" / "documents" / "train.txt").read_text(encoding="utf-8")
    written = {" ".join(re.findall(r"[a-z]+", line.lower().replace("'", ""))) for line in text.splitlines()}
    for row in train:
        as_read = " ".join(re.findall(r"[a-z]+", row["text"].replace("'", "")))
        assert (as_read in written) == (row["label"] == "as written"), row
    assert not {row["text"] for row in train} & {row["text"] for row in validation}
    assert train == word_order_rows(quick=True)[0]  # seeded


def test_phrase_order_pairs_the_two_halves_of_a_line_in_order_or_swapped(tmp_path, monkeypatch):
    """*phrase order* (BERT's sentence-pair task): every row is a line of a task play cut in two halves of at least
    two words, A before B as written ("in order") or B before A ("swapped"); both labels occur; no line is in both
    splits; the rows are seeded."""
    from replications import common

    bert = load(REPLICATIONS / "bert_pretraining.py")
    for play in common.TASK_PLAYS:  # numbered lines stand in for ../shared/data, which tests may not read
        words = ["one", "two", "three", "four", "five", "six", "seven", "eight"]
        lines = [f"{play.split('_')[0]} line {words[n % 8]} {words[n // 8 % 8]} of the play" for n in range(60)]
        (tmp_path / f"{play}.txt").write_text("\n".join(lines), encoding="utf-8")
    monkeypatch.setattr(common, "shakespeare_folder", lambda: tmp_path)
    train, validation = bert.phrase_order_rows(quick=False)
    written = {" ".join(words) for part in common.task_lines(quick=False) for lines in part for words in lines}
    lines = []
    for rows in (train, validation):
        assert {row["label"] for row in rows} == {"in order", "swapped"}
        halves = [(row["text"], row["text_pair"])[:: 1 if row["label"] == "in order" else -1] for row in rows]
        assert all(len(a.split()) >= 2 and len(b.split()) >= 2 for a, b in halves)
        lines.append({f"{a} {b}" for a, b in halves})
        assert lines[-1] <= written
    assert not lines[0] & lines[1]
    assert len(train) > 3 * len(validation) > 0
    assert (train, validation) == bert.phrase_order_rows(quick=False)  # seeded
    assert bert.phrase_order_rows(quick=True)[0]  # the embedded excerpts give rows too


def test_first_seed_names_the_seeds_of_a_rerun(tmp_path):
    from replications.common import parse_args

    args = parse_args("test", ["--first_seed", "3", "--output_dir", str(tmp_path)])
    assert args.seed_list == [3, 4, 5]
    with pytest.raises(ValueError, match="--first_seed"):
        parse_args("test", ["--first_seed", "-1", "--output_dir", str(tmp_path)])


def test_collect_counts_the_three_verdicts_and_reads_pages_of_the_old_rule(tmp_path):
    from replications.collect import BEGIN, END, summary, verdicts, write_docs_summary

    new = (
        "# Paper 2020, Table 1: a claim\n\nSeeds: 0, 1, 2, 3, 4 (5 per setting; 3 to start with, …).\n\n"
        "| claim | the paper | verdict | effect, 95 % interval | evidence |\n|---|---|---|---|---|\n"
        "| part a | +1.0 BLEU | holds | +0.5 [+0.1, +0.9] (95%, paired, n=5) | x |\n"
        "| part b | +2 points | **does not hold** | -0.5 [-0.9, -0.1] (95%, paired, n=5) | y |\n"
        "| part c | lower | *undecided* | +0.1 [-0.2, +0.4] (95%, paired, n=5) | z |\n"
    )
    old = "# Old 2019, §2: another\n\nSeeds: 0, 1, 2 (3 per setting).\n\n| claim | held? | evidence |\n|---|---|---|\n"
    old += "| part d | yes | x |\n| part e | **no** | y |\n"
    assert [(row["part"], row["verdict"]) for row in verdicts(new)] == [
        ("part a", "holds"),
        ("part b", "does not hold"),
        ("part c", "undecided"),
    ]
    assert verdicts(new)[1]["paper"] == "+2 points"
    assert [row["verdict"] for row in verdicts(old)] == ["held (old rule)", "not held (old rule)"]
    (tmp_path / "a_claim.md").write_text(new, encoding="utf-8")
    (tmp_path / "an_old_claim.md").write_text(old, encoding="utf-8")
    table, parts = summary([tmp_path / "a_claim.md", tmp_path / "an_old_claim.md"])
    assert "| 1 | 1 | 1 | 5 |" in table and "1 of 2 held (old rule)" in table and "3 (old rule, not re-run)" in table
    assert "holds 1, does not hold 1, undecided 1." in table
    assert "| 1 | part b | +2 points | does not hold | -0.5 [-0.9, -0.1] (95%, paired, n=5) |" in parts
    docs = tmp_path / "claims.md"
    docs.write_text(f"# Claims\n\n{BEGIN}\nstale\n{END}\n\nafter\n", encoding="utf-8")
    write_docs_summary(table, parts, docs)
    text = docs.read_text(encoding="utf-8")
    assert "stale" not in text and text.endswith(f"{END}\n\nafter\n") and "part b" in text
    assert "](replications/results/a_claim.md)" in text  # links from the docs page, not from replications/
    assert "| `a_claim.py` (" in text and "a_claim.py)" not in text  # the site has no scripts to link to


# --------------------------------------------------------------------------------------------------------------
# The verdict rule (replications/common.py): intervals against scipy and a textbook case, the three outcomes
# --------------------------------------------------------------------------------------------------------------

# Student's sleep data (Cushny and Peebles 1905; R's `sleep`): extra hours of sleep under two drugs, same 10 patients
SLEEP_DRUG_1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0]
SLEEP_DRUG_2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4]


def test_intervals_match_the_textbook_sleep_data():
    """R's t.test on the sleep data: paired, difference 1.58 with 95 % interval [0.7001142, 2.4598858]; Welch,
    [-0.2054832, 3.3654832] on 17.776 degrees of freedom."""
    from replications.common import difference_interval

    paired = difference_interval(SLEEP_DRUG_2, SLEEP_DRUG_1)
    assert (paired.kind, paired.n) == ("paired", 10)
    assert paired.estimate == pytest.approx(1.58) and paired.low == pytest.approx(0.7001142, abs=1e-6)
    assert paired.high == pytest.approx(2.4598858, abs=1e-6)
    welch = difference_interval(SLEEP_DRUG_2, SLEEP_DRUG_1, paired=False)
    assert (welch.low, welch.high) == (pytest.approx(-0.2054832, abs=1e-6), pytest.approx(3.3654832, abs=1e-6))


@pytest.mark.parametrize(
    "higher, lower",
    [([31.2, 30.8, 31.9], [30.1, 30.9, 31.0]), ([0.61, 0.58, 0.66, 0.6, 0.63], [0.55, 0.57, 0.52, 0.58, 0.5])],
)
def test_intervals_match_scipy(higher, lower):
    """Paired = ``ttest_rel``'s interval, Welch = ``ttest_ind(equal_var=False)``'s, one sample = ``ttest_1samp``'s."""
    from scipy import stats

    from replications.common import difference_interval, mean_interval

    cases = [
        (difference_interval(higher, lower), stats.ttest_rel(higher, lower), 0.0),
        (difference_interval(higher, lower, paired=False), stats.ttest_ind(higher, lower, equal_var=False), 0.0),
        (mean_interval(higher, 0.5), stats.ttest_1samp(higher, 0.5), 0.5),  # scipy's is of the mean, ours of mean − 0.5
    ]
    for interval, test, shift in cases:
        reference = test.confidence_interval(0.95)
        assert (interval.low + shift, interval.high + shift) == (
            pytest.approx(reference.low),
            pytest.approx(reference.high),
        )


def test_each_of_the_three_verdicts():
    from replications.common import (
        DOES_NOT_HOLD,
        HOLDS,
        UNDECIDED,
        above,
        above_value,
        decide,
        every,
        shown_above,
    )

    assert above(SLEEP_DRUG_2, SLEEP_DRUG_1)[0] == HOLDS  # [0.70, 2.46] lies above 0
    assert above(SLEEP_DRUG_1, SLEEP_DRUG_2)[0] == DOES_NOT_HOLD  # [-2.46, -0.70] excludes the claimed direction
    assert above(SLEEP_DRUG_2, SLEEP_DRUG_1, threshold=1.0)[0] == UNDECIDED  # straddles 1
    assert above(SLEEP_DRUG_2, SLEEP_DRUG_1, threshold=3.0)[0] == DOES_NOT_HOLD  # excludes an effect of that size
    small = [a + 0.01 * b for a, b in zip(SLEEP_DRUG_1, [1, -1, 2, 0, 1, -2, 1, 0, 1, 1])]
    outcome, interval = above(small, SLEEP_DRUG_1)
    assert outcome == UNDECIDED and interval.low < 0 < interval.high
    assert above(small, SLEEP_DRUG_1, smallest=0.5)[0] == DOES_NOT_HOLD  # any effect is smaller than the claim's
    assert decide(above([2.0], [1.0])[1]) == UNDECIDED  # one seed: no interval, whatever the gap
    assert every(HOLDS, HOLDS) == HOLDS and every(HOLDS, UNDECIDED) == UNDECIDED
    assert every(UNDECIDED, DOES_NOT_HOLD, HOLDS) == DOES_NOT_HOLD
    # a gap between two runs at chance shows nothing: undecided, not holds
    at_chance = [0.50, 0.52, 0.49]
    assert above_value(at_chance, 0.5)[0] == UNDECIDED
    assert shown_above(at_chance, [0.40, 0.41, 0.39], chance=0.5)[0] == UNDECIDED
    assert shown_above([0.8, 0.82, 0.81], [0.40, 0.41, 0.39], chance=0.5)[0] == HOLDS


def test_undecided_parts_get_more_seeds_up_to_the_cap(tmp_path):
    """until_decided adds --seed_step seeds to every setting while a part is undecided, stops when none is, and
    stops at --max_seeds saying which parts are still undecided."""
    from replications.common import ClaimReport, above, parse_args, until_decided

    def replicate(argv, gap):
        args = parse_args("test", argv + ["--output_dir", str(tmp_path)], max_seeds=7)
        runs = []

        def judge():
            page = ClaimReport(name="t", title="t", claim="c", setting="s", header=["a"])
            seeds = args.seed_list
            # arm b is arm a plus ``gap`` plus a seed-dependent wobble: the interval narrows as seeds are added
            a = [float(seed) for seed in seeds]
            b = [value + gap + (0.3 if seed % 2 else -0.3) for seed, value in zip(seeds, a)]
            page.verdict("b above a", above(b, a), "evidence", paper="b > a")
            return page

        return until_decided(args, runs.append, judge), runs, args

    page, runs, args = replicate([], gap=0.6)
    assert runs == [[0, 1, 2], [3, 4]] and args.seed_list == [0, 1, 2, 3, 4]
    assert page.verdicts[0].outcome == "holds" and page.verdicts[0].interval.n == 5
    assert "seeds 3, 4 were added because with 3 these parts were undecided: b above a" in page.notes[0]
    page, runs, args = replicate(["--first_seed", "10", "--max_seeds", "6"], gap=0.0)
    assert runs == [[10, 11, 12], [13, 14], [15]] and page.verdicts[0].outcome == "undecided"
    assert page.notes[-1] == "Still undecided at 6 seeds (the cap, --max_seeds 6): b above a."
    assert "; seed 15 was added because with 5 these parts were undecided" in page.notes[0]
    with pytest.raises(ValueError, match="--max_seeds"):
        parse_args("test", ["--seeds", "4", "--max_seeds", "3", "--output_dir", str(tmp_path)])


@pytest.mark.parametrize("processes", [1, 2])
def test_worker_pool_takes_jobs_that_wait_on_earlier_results(processes):
    """A job submitted after reading earlier results runs in the same pool (how claim 2's RNN runs wait for the base
    Transformers); with one process every job runs here, in submission order."""
    import os

    from replications.common import in_processes, worker_pool

    with worker_pool(processes) as pool:
        first = [pool.submit(pow, 2, n) for n in (3, 4)]
        later = pool.submit(pow, sum(job.result() for job in first), 2)
        here = pool.submit(os.getpid)
        assert later.result() == (8 + 16) ** 2
        assert (here.result() == os.getpid()) == (processes == 1)
    assert in_processes(pow, [(3, 2), (2, 5)], processes) == [9, 32]


def test_checkpoint_average_leaves_the_mean_of_the_last_checkpoints_in_the_model():
    """Claim 2's Transformers are saved as the average of their last checkpoints (Vaswani et al. §6.1): with 2
    checkpoints 2 steps apart in 6 steps, the weights after steps 4 and 6, nothing earlier."""
    from types import SimpleNamespace

    import torch

    module = load(REPLICATIONS / "transformer_ablations.py")
    model, average = torch.nn.Linear(2, 1), module.CheckpointAverage(count=2, every=2)
    state = SimpleNamespace(max_steps=6, global_step=0)
    for step in range(1, 7):
        with torch.no_grad():
            model.weight.fill_(step)
            model.bias.fill_(-step)
        state.global_step = step
        average.on_step_end(None, state, None, model=model)
    average.on_train_end(None, state, None, model=model)
    assert model.weight.tolist() == [[5.0, 5.0]] and model.bias.tolist() == [-5.0]


def test_transformer_ablations_trains_and_scores_every_run_with_the_seeds_asked_for(tmp_path, monkeypatch):
    """A rerun with --first_seed 3 trains every model with seed 3 (an earlier version gave the Transformers seeds
    0, 1, 2 whatever was asked for), every model that is scored translates with the claim's beam search, and the
    Transformers (only they) average their last checkpoints."""
    module = load(REPLICATIONS / "transformer_ablations.py")
    real, runs = module.train_and_translate, []

    def spy(flags, output_dir, seed, pairs, num_beams=1, callbacks=()):
        averaged = any(isinstance(callback, module.CheckpointAverage) for callback in callbacks)
        runs.append((Path(output_dir).name, seed, pairs is not None, num_beams, averaged))
        return real(flags, output_dir, seed, pairs, num_beams, callbacks)

    monkeypatch.setattr(module, "train_and_translate", spy)
    module.main(["--quick", "--first_seed", "3", "--output_dir", str(tmp_path)])
    scored = [run for run in runs if run[2]]
    # every Transformer setting and the RNN, on seed 3 and on the one seed the quick setting's second round adds
    assert len(scored) == 2 * (len(module.TRANSFORMERS) + 1), runs
    assert {(seed, beams) for _, seed, _, beams, _ in scored} == {(3, module.BEAMS), (4, module.BEAMS)}, runs
    # every Transformer is scored as the average of its last checkpoints (§6.1); the RNN is trained as in claim 1
    assert {name.split("-")[0]: averaged for name, *_, averaged in runs} == {"transformer": True, "rnn": False}
