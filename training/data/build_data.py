"""Rebuild the small embedded datasets in ``training/data/`` from the public-domain texts in ``../shared/data``.

The scripts in ``training/`` fall back to these files when no ``--train_file`` / ``--dataset_name`` is given, so
they run on any machine. The files are committed; this script documents (and reproduces) how they were made:

    python training/data/build_data.py [--source ../shared/data]

- ``shakespeare/{train,validation}.txt``    plain text, the opening of Hamlet / Macbeth: run_clm, run_mlm
- ``tragedies/{train,validation}.txt``      eight tragedies (1.1 MB), the last 5 % of each held out: quickstart.py
- ``documents/{train,validation}.txt``     play excerpts separated by a line ``=====``: run_pretraining (NSP)
- ``plays/{train,validation}.jsonl``        {"text", "label"}: which play a speech comes from (run_classification)
- ``names/{train,validation}.jsonl``        {"tokens", "ner_tags"}: character names (PER) and places (LOC) (run_ner)
- ``speakers/{train,validation}.jsonl``     SQuAD-style {"id", "question", "context", "answers"}: who speaks a
                                             quoted line in a stretch of dialogue (run_qa)
- ``next_line/{train,validation}.jsonl``    SWAG-style {"context", "endings", "label"}: which of four lines
                                             follows a given line (run_multiple_choice)
- ``de_en/{train,validation}.jsonl``        {"translation": {"de", "en"}}: gettext UI strings (run_translation)
"""

from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
PLAYS = ["hamlet", "macbeth", "romeo_and_juliet"]
TRAGEDIES = [
    "hamlet",
    "macbeth",
    "lear",
    "othello",
    "romeo_and_juliet",
    "julius_caesar",
    "antony_and_cleopatra",
    "coriolanus",
]
# Names of characters (PER) and places (LOC) that occur in the dialogue of the three plays.
PERSONS = {
    "Hamlet",
    "Horatio",
    "Marcellus",
    "Bernardo",
    "Francisco",
    "Fortinbras",
    "Polonius",
    "Laertes",
    "Ophelia",
    "Gertrude",
    "Claudius",
    "Osric",
    "Rosencrantz",
    "Guildenstern",
    "Yorick",
    "Reynaldo",
    "Voltemand",
    "Cornelius",
    "Macbeth",
    "Banquo",
    "Duncan",
    "Malcolm",
    "Donalbain",
    "Macduff",
    "Lennox",
    "Ross",
    "Menteith",
    "Angus",
    "Caithness",
    "Fleance",
    "Siward",
    "Seyton",
    "Hecate",
    "Cawdor",
    "Glamis",
    "Romeo",
    "Juliet",
    "Tybalt",
    "Mercutio",
    "Benvolio",
    "Capulet",
    "Montague",
    "Paris",
    "Lawrence",
    "Balthasar",
    "Sampson",
    "Gregory",
    "Abraham",
    "Peter",
    "Rosaline",
    "Escalus",
    "Susan",
    "Nell",
}
PLACES = {
    "Denmark",
    "Norway",
    "Elsinore",
    "England",
    "Wittenberg",
    "France",
    "Poland",
    "Rome",
    "Scotland",
    "Ireland",
    "Fife",
    "Inverness",
    "Forres",
    "Dunsinane",
    "Birnam",
    "Colmekill",
    "Verona",
    "Mantua",
    "Padua",
    "Cyprus",
}
SPEAKER = re.compile(r"^([A-Z][A-Za-z ]{0,20}\.)$")
ACT_OR_SCENE = re.compile(r"^(act|scene)\b", re.IGNORECASE)  # 'ACT I.', 'SCENE I.' (2 Henry VI), 'Act I.' (Timon)


def speeches(text: str) -> list[tuple[str, str]]:
    """(speaker heading without the dot, speech as one line) for every block 'Heading.\\nline\\nline…'.

    The editions write speaker headings in one of two styles: abbreviated in mixed case ('Ham.' in Hamlet, 'Romeo.')
    or in capitals ('MACBETH.', 'FIRST WITCH.'). A text's style is that of most of its heading-shaped lines; a
    heading in the other style is no speaker (the direction 'Song.' in Macbeth). Act and scene headings, stage
    directions ('[Exeunt.]') and the cast list (a capitals heading followed by more: 'LADY MACBETH.\\nLADY MACDUFF.')
    are skipped.
    """
    blocks = [[line.strip() for line in block.splitlines() if line.strip()] for block in re.split(r"\n\s*\n", text)]
    blocks = [
        lines for lines in blocks if len(lines) >= 2 and SPEAKER.match(lines[0]) and not ACT_OR_SCENE.match(lines[0])
    ]
    in_capitals = 2 * sum(lines[0].isupper() for lines in blocks) > len(blocks)
    result = []
    for heading, *speech_lines in blocks:
        if heading.isupper() != in_capitals or any(SPEAKER.match(line) and line.isupper() for line in speech_lines):
            continue
        speech = " ".join(speech_lines)
        if not speech.startswith("[") and len(speech) >= 20:
            result.append((heading[:-1], speech))
    return result


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def split(rows: list, n_train: int, n_validation: int) -> tuple[list, list]:
    """At most n_train / n_validation rows, keeping 80/20 when there are fewer."""
    n_train = min(n_train, len(rows) * 4 // 5)
    return rows[:n_train], rows[n_train : n_train + n_validation]


def build(source: Path) -> None:
    rng = random.Random(0)  # one generator, drawn from by the tasks in this order
    texts = {play: (source / "shakespeare" / f"{play}.txt").read_text(encoding="utf-8") for play in PLAYS}
    by_play = {play: speeches(text) for play, text in texts.items()}
    write_plain_text(texts)
    write_tragedies(source)
    write_documents(source)
    write_plays(by_play, rng)
    write_names(by_play, rng)
    write_speakers(by_play, rng)
    write_next_line(texts, rng)
    write_de_en(source)


def write_plain_text(texts: dict[str, str]) -> None:
    """Plain text: the opening of Hamlet (train) and of Macbeth (validation)."""

    def excerpt(play: str, n_chars: int) -> str:
        text = texts[play]
        return text[: text.index("\n\n", n_chars)].strip() + "\n"

    (HERE / "shakespeare").mkdir(exist_ok=True)
    (HERE / "shakespeare" / "train.txt").write_text(excerpt("hamlet", 60_000), encoding="utf-8")
    (HERE / "shakespeare" / "validation.txt").write_text(excerpt("macbeth", 8_000), encoding="utf-8")


def write_tragedies(source: Path) -> None:
    """The quickstart's corpus: eight tragedies, each cut at a blank line near 95 % of its length, the openings to
    train on and the endings held out (the last scenes: text the model never sees, in the style it learns)."""
    train_parts, held_out_parts = [], []
    for play in TRAGEDIES:
        text = (source / "shakespeare" / f"{play}.txt").read_text(encoding="utf-8").strip()
        cut = text.index("\n\n", int(len(text) * 0.95))
        train_parts.append(text[:cut].strip())
        held_out_parts.append(text[cut:].strip())
    (HERE / "tragedies").mkdir(exist_ok=True)
    (HERE / "tragedies" / "train.txt").write_text("\n\n\n".join(train_parts) + "\n", encoding="utf-8")
    (HERE / "tragedies" / "validation.txt").write_text("\n\n\n".join(held_out_parts) + "\n", encoding="utf-8")


def write_documents(source: Path) -> None:
    """Documents for next-sentence prediction: play excerpts separated by a line "====="."""
    documents = {
        "train": ["hamlet", "macbeth", "romeo_and_juliet", "tempest", "othello", "lear"],
        "validation": ["julius_caesar", "twelfth_night"],
    }
    (HERE / "documents").mkdir(exist_ok=True)
    for name, plays in documents.items():
        parts = [(source / "shakespeare" / f"{play}.txt").read_text(encoding="utf-8") for play in plays]
        parts = [
            part[
                part.index("\n\n", 20_000) : part.index("\n\n", 20_000 + (6_000 if name == "train" else 3_000))
            ].strip()
            for part in parts
        ]
        (HERE / "documents" / f"{name}.txt").write_text("\n=====\n".join(parts) + "\n", encoding="utf-8")


def write_plays(by_play: dict, rng: random.Random) -> None:
    """Classification: which play a speech comes from."""
    rows = [{"text": speech[:300], "label": play} for play in PLAYS for _, speech in by_play[play] if len(speech) >= 60]
    rng.shuffle(rows)
    for name, part in zip(("train", "validation"), split(rows, 400, 100)):
        write_jsonl(HERE / "plays" / f"{name}.jsonl", part)


def write_names(by_play: dict, rng: random.Random) -> None:
    """Token classification: names (PER) and places (LOC)."""
    rows = []
    for play in PLAYS:
        for _, speech in by_play[play]:
            tokens = re.findall(r"[A-Za-z']+|[^\sA-Za-z']", speech)[:64]
            tags = ["B-PER" if t in PERSONS else "B-LOC" if t in PLACES else "O" for t in tokens]
            if any(tag != "O" for tag in tags):
                rows.append({"tokens": tokens, "ner_tags": tags})
    rng.shuffle(rows)
    for name, part in zip(("train", "validation"), split(rows, 300, 80)):
        write_jsonl(HERE / "names" / f"{name}.jsonl", part)


def write_speakers(by_play: dict, rng: random.Random) -> None:
    """Extractive QA: who says the quoted words."""
    rows = []
    for play in PLAYS:
        items = by_play[play]
        for start in range(0, len(items) - 3, 3):
            window = [(speaker, speech[:160]) for speaker, speech in items[start : start + 3]]
            context, offsets = "", []
            for speaker, speech in window:
                offsets.append(len(context))
                context += f"{speaker}. {speech} "
            k = rng.randrange(3)
            speaker, speech = window[k]
            quoted = " ".join(speech.split()[:6])
            assert context[offsets[k] : offsets[k] + len(speaker)] == speaker
            rows.append(
                {
                    "id": f"{play}-{start}",
                    "question": f'Who says "{quoted}"?',
                    "context": context.strip(),
                    "answers": {"text": [speaker], "answer_start": [offsets[k]]},
                }
            )
    rng.shuffle(rows)
    for name, part in zip(("train", "validation"), split(rows, 300, 80)):
        write_jsonl(HERE / "speakers" / f"{name}.jsonl", part)


def write_next_line(texts: dict[str, str], rng: random.Random) -> None:
    """Multiple choice: the next line."""
    rows = []
    for play in PLAYS:
        lines = [
            line.strip() for line in texts[play].splitlines() if len(line.strip()) > 25 and not line.strip().isupper()
        ]
        for i in range(0, len(lines) - 1, 7):
            distractors = rng.sample([line for line in lines if line not in (lines[i], lines[i + 1])], 3)
            label = rng.randrange(4)
            endings = distractors[:label] + [lines[i + 1]] + distractors[label:]
            rows.append({"context": lines[i], "endings": endings, "label": label})
    rng.shuffle(rows)
    for name, part in zip(("train", "validation"), split(rows, 300, 80)):
        write_jsonl(HERE / "next_line" / f"{name}.jsonl", part)


def write_de_en(source: Path) -> None:
    """Translation: short gettext pairs."""
    for name, n in (("train", 1000), ("validation", 100)):
        pairs = [
            json.loads(line)
            for line in (source / "gettext-de-en" / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
        ]
        pairs = [p for p in pairs if 3 <= len(p["translation"]["en"]) <= 60]
        write_jsonl(HERE / "de_en" / f"{name}.jsonl", pairs[:n])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, default=HERE.parents[2] / "shared" / "data")
    build(parser.parse_args().source)
