"""The request-length datasets: the packaged registry, its sources, the user's files over it, bad files,
and how a run's lengths follow from a dataset and the lengths stated beside it."""

import pytest

from clustersim.catalog.figures import Confidence, Provenance
from clustersim.errors import CatalogFileError, ClusterSimError, UnknownNameError
from clustersim.serving.datasets import (
    ENV_VAR,
    DatasetKind,
    Percentiles,
    RequestLengths,
    request_dataset,
    request_datasets,
    resolve_lengths,
)

DATASETS = request_datasets(use_env=False)
DEFAULTS = (2048.0, 128.0)


def test_the_registry_holds_the_published_request_sets_and_the_load_generators():
    assert {"openorca", "cnn_dailymail", "mlperf_mixtral", "mlperf_llama3_405b", "sharegpt"} <= set(DATASETS)
    generators = {name for name, d in DATASETS.items() if d.kind is DatasetKind.GENERATOR}
    assert generators == {"fixed", "random", "bench_serving_random", "sglang_random"}
    assert all(d.name == name for name, d in DATASETS.items())


def test_every_figure_has_a_source_and_says_how_it_was_checked():
    for name, dataset in DATASETS.items():
        assert dataset.description and dataset.used_by, name
        for where, figure in dataset.figures():
            assert len(figure.source.strip()) > 10, (name, where)
            assert isinstance(figure.provenance, Provenance) and isinstance(figure.confidence, Confidence)
        if dataset.kind is DatasetKind.DATASET:
            assert dataset.samples is not None or name == "sharegpt", name  # a sample of ShareGPT, not the set


def test_figures_that_are_not_the_sets_own_say_so():
    # CNN/DailyMail's lengths are measured in Llama 3.1 8B's prompt and tokenizer, not GPT-J's: secondary.
    cnn = DATASETS["cnn_dailymail"]
    assert cnn.input.mean is not None and cnn.input.mean.confidence is Confidence.SECONDARY
    assert cnn.input.mean.note and "GPT-J" in cnn.input.mean.note
    assert cnn.mean("output") is None  # no source gives its mean output in tokens: left out, never guessed
    sharegpt = DATASETS["sharegpt"]
    for side in (sharegpt.input, sharegpt.output):  # a 1,000-request sample of one run
        assert side.mean is not None and side.mean.confidence is Confidence.SECONDARY


def test_the_mlperf_llama2_figures():
    orca = DATASETS["openorca"]
    assert orca.samples is not None and orca.samples.value == 24576
    assert orca.mean("input") == pytest.approx(222.33)  # the mean over all 24,576 prompts, not an assumption
    assert orca.mean("output") == pytest.approx(294.45)  # what the reference model generates (MLCommons README)
    assert orca.input.max is not None and orca.input.max.value < 1024
    assert orca.input.percentiles is not None and orca.input.percentiles.values[50] == 152


def test_unknown_names_are_refused_with_the_known_ones():
    with pytest.raises(UnknownNameError, match=r"unknown dataset 'orca'; did you mean openorca\?") as caught:
        request_dataset("orca")
    assert caught.value.field == "dataset" and caught.value.value == "orca"
    assert request_dataset(" OpenOrca ").name == "openorca"


# ---- the user's files ---------------------------------------------------------------------------------------


def test_a_user_file_adds_a_dataset_and_replaces_the_fields_it_gives(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(
        '[chat]\nkind = "dataset"\ndescription = "our chat logs"\nused_by = "our team"\n'
        'input = { mean = { value = 600, source = "our logs, 2026-11" } }\n'
        'output = { mean = { value = 150, source = "our logs, 2026-11" } }\n\n'
        '[openorca.input]\nmean = { value = 300, source = "a test" }\n',
        encoding="utf-8",
    )
    mine = request_datasets([path], use_env=False)
    assert mine["chat"].mean("input") == 600 and mine["openorca"].mean("input") == 300
    assert mine["openorca"].mean("output") == pytest.approx(294.45)  # the fields not given stay


def test_the_environment_names_user_files(tmp_path, monkeypatch):
    path = tmp_path / "env.toml"
    path.write_text('[openorca.output]\nmean = { value = 250, source = "a test" }\n', encoding="utf-8")
    monkeypatch.setenv(ENV_VAR, str(path))
    assert request_dataset("openorca").mean("output") == 250
    assert request_datasets(use_env=False)["openorca"].mean("output") == pytest.approx(294.45)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[x\nkind = 1\n", "not valid TOML"),
        ('[x]\nkind = "dataset"\n', "description"),
        ('[x]\nkind = "set"\ndescription = "desc"\nused_by = "user"\n', "kind"),
        ('[x]\nkind = "dataset"\ndescription = "desc"\nused_by = "user"\nsize = 3\n', "size"),
        ('[x]\nkind = "dataset"\ndescription = "desc"\nused_by = "user"\ninput = { mean = { value = 3 } }\n', "source"),
        (
            '[x]\nkind = "dataset"\ndescription = "desc"\nused_by = "user"\n'
            'input = { mean = { value = 900, source = "abc" }, max = { value = 500, source = "abc" } }\n',
            "mean 900 is outside [min, max] = [0, 500]",
        ),
        (
            '[x]\nkind = "dataset"\ndescription = "desc"\nused_by = "user"\n'
            'input = { percentiles = { values = { 10 = 50, 90 = 20 }, source = "abc" } }\n',
            "non-decreasing",
        ),
        (
            '[x]\nkind = "generator"\ndescription = "desc"\nused_by = "user"\n'
            'samples = { value = 5, source = "abc" }\n',
            "a generator makes as many requests as asked",
        ),
    ],
)
def test_a_bad_file_is_one_error_naming_the_file_the_entry_and_the_rule(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CatalogFileError, match=r"bad\.toml") as caught:
        request_datasets([path], use_env=False)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_percentiles_are_keyed_by_a_percent():
    with pytest.raises(ValueError, match="between 1 and 99"):
        Percentiles(values={100: 5.0}, source="abc")


# ---- a run's lengths ------------------------------------------------------------------------------------------


def test_without_a_dataset_the_stated_lengths_or_the_defaults():
    assert resolve_lengths(None, None, None, defaults=DEFAULTS) == RequestLengths(2048, 128)
    assert resolve_lengths(None, 100, None, defaults=DEFAULTS) == RequestLengths(100, 128)


def test_a_dataset_gives_its_means_and_refuses_a_length_stated_beside_one():
    assert resolve_lengths("openorca", None, None, defaults=DEFAULTS) == RequestLengths(222.33, 294.45, "openorca")
    with pytest.raises(ClusterSimError, match="--input: the dataset 'openorca' sets the input length") as caught:
        resolve_lengths("openorca", 500, None, defaults=DEFAULTS)
    assert (caught.value.field, caught.value.value) == ("--input", 500)
    with pytest.raises(ClusterSimError, match=r"output_tokens: .* not both"):
        resolve_lengths("openorca", None, 10, defaults=DEFAULTS, fields=("input_tokens", "output_tokens"))


def test_a_length_no_source_gives_must_be_stated():
    with pytest.raises(ClusterSimError, match="no published mean output length; give --output"):
        resolve_lengths("cnn_dailymail", None, None, defaults=DEFAULTS)
    assert resolve_lengths("cnn_dailymail", None, 90, defaults=DEFAULTS).output_tokens == 90


def test_a_generator_takes_the_stated_lengths_else_its_own_defaults():
    assert resolve_lengths("random", None, None, defaults=DEFAULTS) == RequestLengths(1024, 128, "random")
    assert resolve_lengths("random", 300, 30, defaults=DEFAULTS) == RequestLengths(300, 30, "random")
    assert resolve_lengths("fixed", None, 64, defaults=DEFAULTS) == RequestLengths(2048, 64, "fixed")
    with pytest.raises(UnknownNameError, match="unknown --dataset 'randm'"):
        resolve_lengths("randm", None, None, defaults=DEFAULTS)
