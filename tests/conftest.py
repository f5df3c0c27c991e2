"""Shared test setup: offline, deterministic, a hypothesis profile with few examples and no deadline."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# tiny models on a shared 2-core machine are dominated by thread synchronisation (a Longformer Trainer test: 25 s on
# two threads under load, 4 s on one): one thread here and in the processes the tests start (accelerate, faults)
os.environ.setdefault("OMP_NUM_THREADS", "1")

import logging  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "ci", max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.load_profile("ci")

FIXTURES = Path(__file__).parent / "fixtures"

# The tests that touch the boundary with transformers, run again on the floor release pyproject allows (README,
# "Tested range"): generation and caches of every family, the conventions of every head, the Trainer's losses, peft,
# pipelines, the official example scripts' contract, and loading as remote code where hf_scratch is not installed.
BOUNDARY_FILES = {
    "test_generation.py",
    "test_static_cache.py",
    "test_conformance.py",
    "test_every_family.py",
    "test_peft.py",
    "test_pipelines.py",
    "test_example_contract.py",
}


# Marks transformers' own test code puts on its common model tests (test_transformers_model_tests.py runs them);
# transformers' conftest registers them, ours does too, so that pytest does not warn of unknown marks.
TRANSFORMERS_TEST_MARKS = (
    "accelerate_tests",
    "flash_attn_test",
    "flash_attn_3_test",
    "flash_attn_4_test",
    "torch_compile_test",
    "torch_export_test",  # 5.10.1 (the floor run imports the module before deselecting it)
    "slow",
)


def pytest_configure(config):
    for mark in TRANSFORMERS_TEST_MARKS:
        config.addinivalue_line("markers", f"{mark}: a mark of transformers' own tests (ModelTesterMixin)")


def pytest_collection_modifyitems(items):
    for item in items:
        if item.path.name in BOUNDARY_FILES or "remote_code" in item.name:
            item.add_marker(pytest.mark.boundary)


class DeprecationRecords(logging.Handler):
    """Collects what transformers *logs* about deprecations (it announces many renames with ``logger.warning_once``
    rather than a DeprecationWarning, e.g. "`past_key_values` is deprecated")."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        message = record.getMessage()
        if "deprecat" in message.lower():
            self.messages.append(message)


@pytest.fixture(autouse=True)
def logged_deprecations_fail():
    records, logger = DeprecationRecords(), logging.getLogger("transformers")
    logger.addHandler(records)
    yield
    logger.removeHandler(records)
    if records.messages:
        pytest.fail(f"transformers logged a deprecation on our code path: {records.messages[0]}")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield


@pytest.fixture(autouse=True)
def one_thread():
    """Every test runs on one torch thread (see OMP_NUM_THREADS above), set again for each test since a test (the
    Trainer, accelerate) may change it."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def run_outputs(tmp_path_factory):
    """``run_outputs(name)``: the results of the training run ``training_runs.RUNS[name]``, made once per session
    (the first time a test asks for it) and shared by test_training.py and test_model_cards.py."""
    from training_runs import runner

    return runner(tmp_path_factory)


MODEL_TESTS_FILE = "test_transformers_model_tests.py"
OUTCOME_RANK = {"skipped": 0, "passed": 1, "error": 2, "failed": 3}  # a test's worst report counts (subtests too)


def pytest_terminal_summary(terminalreporter):
    """transformers' own model tests (test_transformers_model_tests.py), counted per test class, i.e. per family
    (the RNN's encoder-only classifier has a class of its own): what CI's log shows of them."""
    worst = {}
    for category in OUTCOME_RANK:
        for report in terminalreporter.stats.get(category, []):
            nodeid = getattr(report, "nodeid", "")
            if f"{MODEL_TESTS_FILE}::" not in nodeid or nodeid.count("::") < 2:
                continue
            if category == "passed" and getattr(report, "when", "call") != "call":
                continue
            if OUTCOME_RANK[category] >= OUTCOME_RANK.get(worst.get(nodeid), -1):
                worst[nodeid] = category
    if not worst:
        return
    per_class = {}
    for nodeid, outcome in worst.items():
        counts = per_class.setdefault(nodeid.split("::")[1], dict.fromkeys(OUTCOME_RANK, 0))
        counts[outcome] += 1
    import transformers

    title = f"transformers {transformers.__version__}'s model tests (ModelTesterMixin), per family"
    terminalreporter.section(f"{title}; a test counts once, by its worst subtest")
    for name, counts in sorted(per_class.items()):
        terminalreporter.line(
            f"{name}: {counts['passed']} passed, {counts['failed']} failed, {counts['error']} errors, "
            f"{counts['skipped']} skipped"
        )
