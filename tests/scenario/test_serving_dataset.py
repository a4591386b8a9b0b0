"""A serving scenario that names a request dataset: it keeps the name (not copies of the dataset's means),
and a file that names an unknown dataset, or states a length the dataset gives, is refused on load."""

import tomllib
from pathlib import Path

import pytest
from pydantic import ValidationError

from clustersim.scenario.files import ScenarioFileError, load_scenario, save_scenario
from clustersim.scenario.schema import RequestSpec, ServingScenario, ServingSystemSpec
from clustersim.serving.datasets import RequestLengths


def scenario(request: RequestSpec) -> ServingScenario:
    return ServingScenario(model="llama2-70b", system=ServingSystemSpec(instance="p5.48xlarge", tp=2), request=request)


def test_the_lengths_come_from_the_dataset_or_the_command_lines_defaults():
    assert RequestSpec().lengths() == RequestLengths(2048, 128)
    assert RequestSpec(input_tokens=512).lengths() == RequestLengths(512, 128)
    assert RequestSpec(dataset="openorca").lengths() == RequestLengths(222.33, 294.45, "openorca")
    assert RequestSpec(dataset="cnn_dailymail", output_tokens=100).lengths() == RequestLengths(
        870.73, 100, "cnn_dailymail"
    )
    assert RequestSpec(dataset="random", input_tokens=300).lengths() == RequestLengths(300, 128, "random")


def test_a_saved_scenario_keeps_the_dataset_and_replays_it(tmp_path: Path):
    saved = scenario(RequestSpec(dataset="openorca", precision="fp8"))
    path = save_scenario(tmp_path / "s.toml", saved)
    request = tomllib.loads(path.read_text(encoding="utf-8"))["request"]
    assert request["dataset"] == "openorca" and "input_tokens" not in request and "output_tokens" not in request
    assert load_scenario(path) == saved


@pytest.mark.parametrize(
    ("request_table", "message"),
    [
        ('dataset = "orca"', "unknown dataset 'orca'; did you mean openorca?"),
        ('dataset = "openorca"\ninput_tokens = 300', "input_tokens: the dataset 'openorca' sets the input length"),
        ('dataset = "cnn_dailymail"', "output_tokens: the dataset 'cnn_dailymail' has no published mean output"),
    ],
)
def test_a_file_with_a_bad_dataset_is_refused_naming_the_field(tmp_path: Path, request_table: str, message: str):
    path = tmp_path / "bad.toml"
    path.write_text(
        f'kind = "serving"\nmodel = "llama2-70b"\n[system]\ninstance = "p5.48xlarge"\n[request]\n{request_table}\n',
        encoding="utf-8",
    )
    with pytest.raises(ScenarioFileError) as info:
        load_scenario(path)
    assert "field 'request'" in str(info.value) and message in str(info.value)


def test_the_record_refuses_the_same():
    with pytest.raises(ValidationError, match="not both"):
        RequestSpec(dataset="sharegpt", output_tokens=10)
