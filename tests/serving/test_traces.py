"""Request traces: the CSV and JSON Lines readers, Mooncake's published traces against the paper's figures, the
prefix cache their block hashes give, and the simulator replaying them."""

import functools
import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.serving.datasets import request_datasets
from clustersim.serving.engine import serving_system_for_instance
from clustersim.serving.estimate import Request
from clustersim.serving.simulate import Load, simulate
from clustersim.serving.traces import HASH_BLOCK_TOKENS, Trace, cached_prefix_tokens, read_trace
from clustersim.workload.zoo import load_model

MOONCAKE = Path(__file__).parent.parent / "data" / "mooncake"
AZURE = Path(__file__).parent.parent / "data" / "azure"
# Qin et al., FAST'25, Table 2 (and FAST25-release/README.md): requests, mean input and output, "Cache Ratio"
PUBLISHED = {
    "conversation": (12031, 12035, 343, 0.40),
    "synthetic": (3993, 15325, 149, 0.66),
}


@functools.cache
def mooncake(name: str) -> Trace:
    return read_trace(MOONCAKE / f"{name}_trace.jsonl.gz")


def unbounded_share(trace: Trace) -> float:
    """Prompt tokens found cached with a cache that never evicts, over all prompt tokens."""
    assert trace.prefix_hashes is not None
    found = cached_prefix_tokens(trace.prefix_hashes, trace.input_tokens.tolist(), float("inf"))
    return float(found.sum() / trace.input_tokens.sum())


# ---- Mooncake's traces against the paper -----------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_mooncake_traces_have_the_published_counts_and_mean_lengths(name):
    requests, mean_in, mean_out, _ = PUBLISHED[name]
    trace = mooncake(name)
    assert trace.arrival_s.size == requests
    assert round(float(trace.input_tokens.mean())) == mean_in
    assert round(float(trace.output_tokens.mean())) == mean_out
    assert trace.prefix_hashes is not None and len(trace.prefix_hashes) == requests
    assert np.all(np.diff(trace.arrival_s) >= 0)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_the_unbounded_cache_finds_the_papers_cache_ratio(name):
    # Table 2's "Cache Ratio" (40% and 66%) is the share of prompts found in earlier requests' blocks; ours keeps
    # each prompt's last token to run and counts leading blocks only: 37.4% and 65.1%
    assert unbounded_share(mooncake(name)) == pytest.approx(PUBLISHED[name][3], abs=0.03)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_a_local_cache_holds_less_than_half_and_50m_tokens_nearly_all(name):
    # Figure 9: "a local cache with a 3M token capacity does not achieve 50% of the theoretical maximum hit rate in
    # most scenarios", and "a cache capacity of 50M tokens nearly reaches the theoretical maximum"
    trace = mooncake(name)
    best = unbounded_share(trace)
    total = trace.input_tokens.sum()
    hashes, inputs = trace.prefix_hashes, trace.input_tokens.tolist()
    small = cached_prefix_tokens(hashes, inputs, 3e6 / HASH_BLOCK_TOKENS).sum() / total
    large = cached_prefix_tokens(hashes, inputs, 50e6 / HASH_BLOCK_TOKENS).sum() / total
    assert small < 0.5 * best
    assert large > 0.95 * best


@pytest.mark.parametrize(
    ("name", "entry"), [("conversation", "mooncake_conversation"), ("synthetic", "mooncake_synthetic")]
)
def test_the_dataset_figures_are_the_traces_own(name, entry):
    assert_figures_are_the_traces(entry, mooncake(name))


def assert_figures_are_the_traces(entry: str, trace: Trace) -> None:
    """The request set ``entry``'s count, means, extremes and percentiles are the trace's own."""
    found = request_datasets(use_env=False)[entry]
    assert found.samples is not None and found.samples.value == trace.arrival_s.size
    for side, lengths in (("input", trace.input_tokens), ("output", trace.output_tokens)):
        stats = getattr(found, side)
        assert stats.mean.value == pytest.approx(float(lengths.mean()), abs=0.005)
        assert (stats.min.value, stats.max.value) == (lengths.min(), lengths.max())
        for percent, tokens in stats.percentiles.values.items():
            assert tokens == pytest.approx(float(np.percentile(lengths, percent)), abs=0.05)


@pytest.mark.parametrize(
    ("name", "entry", "requests", "span_s"),
    [("code", "azure_code_2023", 8819, 3435.948), ("conv", "azure_conversation_2023", 19366, 3501.722)],
)
def test_azures_traces_are_read_from_their_timestamps_and_give_their_sets_figures(name, entry, requests, span_s):
    trace = read_trace(AZURE / f"AzureLLMInferenceTrace_{name}.csv.gz")
    assert trace.arrival_s.size == requests and trace.prefix_hashes is None
    assert trace.arrival_s[0] == 0.0 and trace.arrival_s[-1] == pytest.approx(span_s, abs=1e-3)
    assert np.all(np.diff(trace.arrival_s) >= 0)
    assert_figures_are_the_traces(entry, trace)


def test_an_azure_timestamp_that_is_not_a_date_is_refused(tmp_path):
    path = tmp_path / "azure.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.97,100,5\nyesterday,100,5\n")
    with pytest.raises(ClusterSimError, match=r"line 3: 'yesterday,100,5' is not numbers in TIMESTAMP"):
        read_trace(path)
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:04.5,100,5\n2023-11-16 18:17:03,7,2\n")
    trace = read_trace(path)
    assert trace.arrival_s.tolist() == [0.0, 1.5] and trace.input_tokens.tolist() == [7, 100]


# ---- the prefix cache ------------------------------------------------------------------------------------------

prompts = st.lists(
    st.tuples(st.lists(st.integers(0, 12), min_size=1, max_size=6), st.integers(0, HASH_BLOCK_TOKENS - 1)),
    min_size=1,
    max_size=40,
)


def lengths_of(requests) -> tuple[list[tuple[int, ...]], list[int]]:
    """Block ids and a prompt length they fit: full blocks but the last, which holds ``1 + extra`` tokens."""
    hashes = [tuple(blocks) for blocks, _ in requests]
    return hashes, [(len(blocks) - 1) * HASH_BLOCK_TOKENS + 1 + extra for blocks, extra in requests]


@settings(max_examples=150, deadline=None)
@given(prompts, st.integers(1, 30))
def test_a_larger_cache_finds_at_least_as_much_and_never_a_whole_prompt(requests, capacity):
    hashes, inputs = lengths_of(requests)
    small = cached_prefix_tokens(hashes, inputs, capacity)
    large = cached_prefix_tokens(hashes, inputs, capacity + 5)
    unbounded = cached_prefix_tokens(hashes, inputs, float("inf"))
    assert np.all(small <= large) and np.all(large <= unbounded)
    assert np.all(unbounded <= np.array(inputs) - 1) and np.all(small >= 0)


@settings(max_examples=150, deadline=None)
@given(prompts)
def test_an_unbounded_cache_finds_each_prompts_leading_blocks_seen_before(requests):
    hashes, inputs = lengths_of(requests)
    seen: set[int] = set()
    expected = []
    for blocks, n in zip(hashes, inputs, strict=True):
        lead = 0
        while lead < len(blocks) and blocks[lead] in seen:
            lead += 1
        expected.append(min(lead * HASH_BLOCK_TOKENS, n - 1))
        seen.update(blocks)
    assert cached_prefix_tokens(hashes, inputs, float("inf")).tolist() == expected


def test_the_least_recently_used_block_is_evicted_first():
    n = 3 * HASH_BLOCK_TOKENS
    # a cache of 3 blocks: request 1 uses 0,1,2; request 2 uses 3 (0 goes); request 3 finds 1,2 then misses 0
    found = cached_prefix_tokens([(0, 1, 2), (3,), (1, 2, 0)], [n, HASH_BLOCK_TOKENS, n], 3)
    assert found.tolist() == [0, 0, 2 * HASH_BLOCK_TOKENS]
    # used again, a block is kept: 0 is touched by request 2, so 1 is the one evicted
    found = cached_prefix_tokens([(0, 1, 2), (0, 3), (0, 2)], [n, 2 * HASH_BLOCK_TOKENS, 2 * HASH_BLOCK_TOKENS], 3)
    assert found.tolist() == [0, HASH_BLOCK_TOKENS, 2 * HASH_BLOCK_TOKENS - 1]


# ---- readers ---------------------------------------------------------------------------------------------------


def test_a_jsonl_trace_takes_mooncake_keys_in_milliseconds_and_is_sorted(tmp_path):
    rows = [
        {"timestamp": 1500, "input_length": 600, "output_length": 5, "hash_ids": [7, 8]},
        {"timestamp": 0, "input_length": 512, "output_length": 9, "hash_ids": [7]},
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    trace = read_trace(path)
    assert trace.arrival_s.tolist() == [0.0, 1.5]
    assert trace.input_tokens.tolist() == [512, 600] and trace.output_tokens.tolist() == [9, 5]
    assert trace.prefix_hashes == ((7,), (7, 8))


def test_a_jsonl_trace_with_the_csv_names_and_a_gzipped_csv_read_the_same(tmp_path):
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text('{"arrival_s": 0.25, "input_tokens": 100, "output_tokens": 3}\n')
    zipped = tmp_path / "t.csv.gz"
    zipped.write_bytes(gzip.compress(b"arrival_s,input_tokens,output_tokens\n0.25,100,3\n"))
    for trace in (read_trace(jsonl), read_trace(zipped)):
        assert (trace.arrival_s.tolist(), trace.input_tokens.tolist(), trace.output_tokens.tolist()) == (
            [0.25],
            [100],
            [3],
        )
        assert trace.prefix_hashes is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"timestamp": 0, "input_length": 10}\n', "missing output_length"),
        ("[1, 2, 3]\n", "each line must be a JSON object"),
        ('{"timestamp": 0,\n', "line 1: not JSON"),
        ('{"timestamp": -5, "input_length": 10, "output_length": 2}\n', "timestamp must be >= 0"),
        ('{"timestamp": 0, "input_length": "ten", "output_length": 2}\n', "must be numbers"),
        ('{"timestamp": 0, "input_length": 1000, "output_length": 2, "hash_ids": [1]}\n', "1 hash_ids for a 1,000"),
        ('{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1.5]}\n', "list of integers"),
        (
            '{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1]}\n'
            '{"timestamp": 1, "input_length": 10, "output_length": 2}\n',
            "line 2: hash_ids must be on every request or on none",
        ),
    ],
)
def test_a_bad_jsonl_trace_is_refused_naming_the_file_and_the_line(tmp_path, text, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(ClusterSimError, match=r"^--trace: ") as found:
        read_trace(path)
    assert message in str(found.value) and "\n" not in str(found.value)
    assert (found.value.field, found.value.value) == ("--trace", str(path))


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("bad.jsonl.gz", b"not gzip at all", "cannot read"),
        ("absent.jsonl", None, "No such file"),
        ("empty.csv", b"", "needs a CSV header with arrival_s, input_tokens, output_tokens or Azure's TIMESTAMP"),
        ("lines.json", b"[1, 2]\n", "line 1: each line must be a JSON object"),  # .json: JSON Lines, not CSV
        ("lines.jsonl.gz", gzip.compress(b"[1, 2]\n", mtime=0), "line 1: each line must be a JSON object"),
        ("hashes.jsonl", b'{"timestamp": 0, "input_length": 10, "output_length": 2}\n', None),
    ],
    ids=["corrupt-gzip", "absent", "empty-csv", "json-lines-named-json", "gzipped-json-lines", "no-hashes"],
)
def test_a_trace_file_is_read_by_its_kind_or_refused_with_the_reason(tmp_path, name, content, message):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    if message is None:
        assert read_trace(path).prefix_hashes is None
        return
    with pytest.raises(ClusterSimError, match=r"^--trace: ") as found:
        read_trace(path)
    assert message in str(found.value)
    assert (found.value.field, found.value.value) == ("--trace", str(path))


def test_blank_lines_are_skipped_one_token_is_a_prompt_and_ties_keep_the_files_order(tmp_path):
    csv = tmp_path / "t.csv"
    csv.write_text("arrival_s,input_tokens,output_tokens\n1,300,2\n\n1,1,1\n0,5,5\n")
    trace = read_trace(csv)
    assert trace.input_tokens.tolist() == [5, 300, 1] and trace.output_tokens.tolist() == [5, 2, 1]
    jsonl = tmp_path / "t.jsonl"
    rows = [(0, 1024, [4, 5]), (0, 512, [4])]
    jsonl.write_text(
        "\n\n".join(
            json.dumps({"timestamp": t, "input_length": n, "output_length": 1, "hash_ids": h}) for t, n, h in rows
        )
    )
    trace = read_trace(jsonl)
    assert trace.input_tokens.tolist() == [1024, 512] and trace.prefix_hashes == ((4, 5), (4,))


def test_the_cache_needs_a_length_for_every_request():
    with pytest.raises(ValueError):
        cached_prefix_tokens([(1,), (2,)], [600], float("inf"))


# ---- the simulator replays a trace's prefix cache --------------------------------------------------------------


@functools.cache
def one_h100():
    return load_model("llama3.1-8b", use_env=False), serving_system_for_instance(
        load_catalog(use_env=False), "p5.48xlarge", tp=8
    )


def shared_prompts(requests: int = 60) -> Trace:
    """Conversations of three turns, each turn's prompt the one before it and two more blocks."""
    hashes, inputs = [], []
    for k in range(requests):
        conversation, turn = divmod(k, 3)
        blocks = tuple(1000 * conversation + b for b in range(2 * turn + 2))
        hashes.append(blocks)
        inputs.append(len(blocks) * HASH_BLOCK_TOKENS)
    arrival = np.arange(requests, dtype=np.float64) * 0.5
    return Trace(arrival, np.array(inputs, dtype=np.int64), np.full(requests, 64, dtype=np.int64), tuple(hashes))


def test_a_trace_with_block_hashes_finds_its_earlier_turns_and_the_first_token_comes_sooner():
    model, system = one_h100()
    trace = shared_prompts()
    warm = simulate(model, system, Request(1024, 64), Load(trace=trace))
    cold = simulate(model, system, Request(1024, 64), Load(trace=trace), prefix_hit_rate=0.0)
    expected = cached_prefix_tokens(trace.prefix_hashes, trace.input_tokens.tolist(), float("inf"))
    assert warm.setup["prefix_cache"] == {"source": "trace", "cached_share": expected.sum() / trace.input_tokens.sum()}
    assert cold.setup["prefix_cache"] == {"source": "rate", "cached_share": 0.0}
    assert warm.setup["prefix_cache"]["cached_share"] == pytest.approx(6 / 12)  # of 2 + 4 + 6 blocks, 2 and 4 found
    assert float(np.mean(warm.ttft_s)) < 0.8 * float(np.mean(cold.ttft_s))


def test_a_stated_hit_rate_replaces_the_traces_hashes():
    model, system = one_h100()
    run = simulate(model, system, Request(1024, 64), Load(trace=shared_prompts()), prefix_hit_rate=0.5)
    assert run.setup["prefix_cache"]["source"] == "rate"
    assert run.setup["prefix_cache"]["cached_share"] == pytest.approx(0.5, abs=0.01)


def test_json_lines_are_known_by_their_content_whatever_the_name_and_a_bad_length_names_both_keys(tmp_path):
    path = tmp_path / "trace.txt"
    path.write_text('\n  {"timestamp": 0, "input_length": 64, "output_length": 4}\n')  # a blank line first
    assert read_trace(path).input_tokens.tolist() == [64]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0, "input_length": 0, "output_length": 4}\n')
    with pytest.raises(ClusterSimError, match="input_length/output_length >= 1"):
        read_trace(bad)
