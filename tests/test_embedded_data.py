"""The speech parser of ``training/data/build_data.py`` and the embedded tasks it wrote: speaker headings in either
style of the editions (mixed-case 'Ham.' in Hamlet, capitals 'MACBETH.' in Macbeth), never an act or scene heading,
a stage direction or the cast list."""

from __future__ import annotations

import collections
import json
from pathlib import Path

from training.data.build_data import PLAYS, speeches

DATA = Path(__file__).resolve().parents[1] / "training" / "data"

MACBETH_STYLE = """MACBETH

Persons Represented

DUNCAN, King of Scotland.

LADY MACBETH.
LADY MACDUFF.
Gentlewoman attending on Lady Macbeth.

ACT I.
SCENE I. An open Place. Thunder and Lightning.

[Enter three Witches.]

FIRST WITCH.
When shall we three meet again?
In thunder, lightning, or in rain?

SECOND WITCH.
When the hurlyburly's done,
When the battle's lost and won.

Song.
Black spirits and white, red spirits and gray;

MACBETH.
[Aside.] Two truths are told.

DUNCAN.
What he hath lost, noble Macbeth hath won.
"""

HAMLET_STYLE = """ACT I.
Scene I. Elsinore. A platform before the Castle.

Ber.
Who's there?

Fran.
Nay, answer me: stand, and unfold yourself.

[Exit Francisco.]

Hor.
Before my God, I might not this believe
"""


def test_headings_in_capitals_are_speakers_act_scene_directions_and_cast_list_are_not():
    assert speeches(MACBETH_STYLE) == [
        ("FIRST WITCH", "When shall we three meet again? In thunder, lightning, or in rain?"),
        ("SECOND WITCH", "When the hurlyburly's done, When the battle's lost and won."),
        ("DUNCAN", "What he hath lost, noble Macbeth hath won."),
    ]


def test_mixed_case_headings_are_still_speakers():
    assert speeches(HAMLET_STYLE) == [
        ("Fran", "Nay, answer me: stand, and unfold yourself."),
        ("Hor", "Before my God, I might not this believe"),
    ]


def test_embedded_tasks_hold_every_play():
    """Each play gives at least a fifth of the rows of the plays (classification) and speakers (QA) tasks."""
    for task, play_of in (("plays", lambda row: row["label"]), ("speakers", lambda row: row["id"].rsplit("-", 1)[0])):
        for split in ("train", "validation"):
            rows = [
                json.loads(line) for line in (DATA / task / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()
            ]
            counts = collections.Counter(map(play_of, rows))
            assert set(counts) == set(PLAYS) and min(counts.values()) >= len(rows) / 5, (task, split, counts)
