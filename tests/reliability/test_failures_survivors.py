"""The failure model against its published numbers, closed forms and boundaries: the rates and priors
as stated, Young's and Daly's intervals (Daly's switch to ``M`` at ``delta == 2M``), Daly's eq. 13 on
both sides of the ``ln(e^x - 1)`` switch at 30, the remainder tolerance of ``segments``, the expected
run's bookkeeping, and every refusal naming its field, its value and what is valid.

Mutants left alive on purpose (no test can tell them apart without pinning an implementation detail):

- ``expected_run``: ``positive=None`` for checkpoint_s or restart_s: ``None`` is falsy like ``False``.
- ``_log_expm1``: ``x >= 30`` or ``x > 31``: both forms of ``ln(e^x - 1)`` are exact to an ulp on
  (30, 31] (and bit-identical at 30), so switching there changes no result beyond the last bit.
"""

import math
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.errors import ClusterSimError, UnknownNameError
from clustersim.reliability import failures
from clustersim.reliability.failures import (
    DETECT_REPLACE_S,
    IDLE_POWER_FRACTION,
    PRIORS,
    RATES,
    WARMUP_S,
    Goodput,
    Prior,
    daly_interval_s,
    expected_run,
    failure_rate,
    job_mtbf_s,
    segment_time_s,
    segments,
    young_interval_s,
)
from clustersim.units import format_seconds

HOUR = 3600.0
DAY = 86400.0
M = 3 * HOUR  # a job MTBF of three hours
SETTINGS = settings(max_examples=50, deadline=None, derandomize=True)


# --- Published rates and the job MTBF -------------------------------------------------------------


def test_llama3_job_of_16k_gpus_fails_every_3_1_hours():
    """Llama 3: 268 GPU faults + 151 host/network/software interruptions in 54 days on 16,384 GPUs in
    2,048 nodes: 54 x 24 / 419 = 3.093 hours between interruptions."""
    rate = RATES["llama3"]
    assert rate.per_device_hour * 54 * 24 * 16_384 == pytest.approx(268)
    assert rate.per_node_hour * 54 * 24 * 2048 == pytest.approx(151)
    mtbf = job_mtbf_s(rate, num_devices=16_384, num_nodes=2048)
    assert mtbf / HOUR == pytest.approx(54 * 24 / 419) and 3.0 < mtbf / HOUR < 3.2


def test_rsc_rates_are_per_node_day_and_give_the_papers_mttf():
    """RSC-1: 6.50 and RSC-2: 2.34 failures per 1,000 node-days, none per GPU; a 16,384-GPU job in 2,048
    nodes on RSC-1 fails every 24 h / (2,048 x 6.5e-3) = 1.80 h (the paper's ~1.8 h), on RSC-2 every
    24 / (2,048 x 2.34e-3) = 5.01 h."""
    assert RATES["rsc1"].per_device_hour == 0 and RATES["rsc1"].per_node_hour * 24 * 1000 == pytest.approx(6.50)
    assert RATES["rsc2"].per_device_hour == 0 and RATES["rsc2"].per_node_hour * 24 * 1000 == pytest.approx(2.34)
    assert job_mtbf_s(RATES["rsc1"], num_devices=16_384, num_nodes=2048) / HOUR == pytest.approx(1.8029, rel=1e-4)
    assert job_mtbf_s(RATES["rsc2"], num_devices=16_384, num_nodes=2048) / HOUR == pytest.approx(5.0080, rel=1e-4)


def test_one_device_in_one_node_is_a_job():
    """The smallest job, one device in one node, is accepted: with Llama 3's rates it fails every
    1 / (268 / (1296 x 16384) + 151 / (1296 x 2048)) hours = 14,386 h."""
    assert job_mtbf_s(RATES["llama3"], num_devices=1, num_nodes=1) / HOUR == pytest.approx(14_385.95, rel=1e-6)
    # eight GPUs in one node: 1 / (8 x 268 / (1296 x 16384) + 151 / (1296 x 2048)) = 6,334.6 h
    assert job_mtbf_s(RATES["llama3"], num_devices=8, num_nodes=1) / HOUR == pytest.approx(6334.63, rel=1e-6)


@SETTINGS
@given(
    devices=st.integers(1, 100_000),
    nodes=st.integers(1, 20_000),
    per_device=st.floats(1e-9, 1e-2),
    per_node=st.floats(0, 1e-2),
)
def test_job_mtbf_is_one_over_the_summed_rates(devices, nodes, per_device, per_node):
    """A synchronous job stops when any part fails: 1 / MTBF = devices x per-device + nodes x per-node."""
    rate = failures.FailureRate(name="x", per_device_hour=per_device, source="test", per_node_hour=per_node)
    mtbf = job_mtbf_s(rate, num_devices=devices, num_nodes=nodes)
    assert mtbf == pytest.approx(HOUR / (devices * per_device + nodes * per_node), rel=1e-12)


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [("devices", {"num_devices": 0, "num_nodes": 1}), ("nodes", {"num_devices": 8, "num_nodes": -2})],
)
def test_job_mtbf_refuses_fewer_than_one_device_or_node(field, kwargs):
    """No devices or no nodes is refused, naming the count, its value and the rule."""
    value = kwargs[f"num_{field}"]
    with pytest.raises(ClusterSimError, match=f"{field} must be at least 1, got {value}") as err:
        job_mtbf_s(RATES["llama3"], **kwargs)
    assert err.value.field == field and err.value.value == value


# --- failure_rate by name or number ---------------------------------------------------------------


@pytest.mark.parametrize("spec", ["llama3", "  LLaMA3 ", "Llama3\n"])
def test_failure_rate_by_name_ignores_case_and_whitespace(spec):
    """A published rate is found by its name in any case, with spaces around it."""
    assert failure_rate(spec) is RATES["llama3"]


@pytest.mark.parametrize(("spec", "value"), [("1e-5", 1e-5), (2.5e-6, 2.5e-6), (" 0.5 ", 0.5)])
def test_failure_rate_as_a_number_per_device_hour(spec, value):
    """A number in (0, 1) is failures per device-hour, named by its value and sourced as given."""
    rate = failure_rate(spec)
    assert rate.per_device_hour == value and rate.per_node_hour == 0
    assert rate.name == f"{value:g}/device-hour" and rate.source == "given"


def test_failure_rate_unknown_name_lists_the_names_and_the_number_form():
    """Text that is neither a name nor a number is an unknown failure rate, listing what is valid."""
    with pytest.raises(UnknownNameError, match=r"^unknown failure rate 'often'") as err:
        failure_rate("often")
    assert err.value.field == "failure_rate" and err.value.value == "often"
    assert err.value.valid == sorted([*RATES, "<failures per device-hour>"])
    assert "<failures per device-hour>" in str(err.value) and "llama3" in str(err.value)


@pytest.mark.parametrize("spec", [0, "0", 1, "1", 1.0, 1.5, -1e-5, "nan", math.inf, "-inf"])
def test_failure_rate_outside_zero_one_is_refused(spec):
    """0, 1 and beyond, negative, NaN and inf are not a probability-like rate per device-hour."""
    with pytest.raises(ClusterSimError, match=r"failures per device-hour is not in \(0, 1\)") as err:
        failure_rate(spec)
    assert err.value.field == "failure_rate"
    value = float(spec)
    assert math.isnan(err.value.value) if math.isnan(value) else err.value.value == value
    assert repr(value) in str(err.value)


# --- Priors -----------------------------------------------------------------------------------------


def test_priors_are_read_with_their_ranges_and_sources():
    """priors.toml: detection plus replacement 600 s (150 to 1,800 s), warm-up 300 s (30 to 1,047 s),
    idle power 11.5% of board power (no range), each with its source and note."""
    detect, warmup, idle = PRIORS["detect_replace"], PRIORS["warmup"], PRIORS["idle_power"]
    assert (detect.value, detect.low, detect.high) == (600.0, 150, 1800)
    assert (warmup.value, warmup.low, warmup.high) == (300.0, 30, 1047)
    assert (idle.value, idle.low, idle.high) == (0.115, None, None)
    assert isinstance(detect.value, float) and isinstance(idle.value, float)
    assert (DETECT_REPLACE_S, WARMUP_S, IDLE_POWER_FRACTION) == (600.0, 300.0, 0.115)
    assert detect.source.startswith("PyTorch torch.distributed") and "ByteRobust" in detect.source
    assert warmup.source.startswith("MegaScale") and idle.source.startswith("Prior: an H200 SXM")
    assert "FlashRecovery" in detect.note and warmup.note.startswith("Process start")
    assert idle.note.startswith("Applied to every accelerator")


def test_a_prior_without_note_or_range_reads_as_empty_and_none(tmp_path, monkeypatch):
    """A table with only a value and a source gets an empty note and no range; ``fraction`` is a value."""
    (tmp_path / "priors.toml").write_text('[bare]\nvalue_s = 5\nsource = "s"\n[part]\nfraction = 0.5\nsource = "t"\n')
    monkeypatch.setattr(failures.resources, "files", lambda package: tmp_path)
    assert failures._priors() == {
        "bare": Prior(value=5.0, source="s", note="", low=None, high=None),
        "part": Prior(value=0.5, source="t", note="", low=None, high=None),
    }


# --- Young and Daly -------------------------------------------------------------------------------


@SETTINGS
@given(checkpoint=st.floats(1, 3600), mtbf_h=st.floats(0.51, 1000))
def test_young_and_daly_closed_forms(checkpoint, mtbf_h):
    """Young: sqrt(2 delta M); Daly: sqrt(2 delta M)(1 + sqrt(delta/2M)/3 + delta/18M) - delta for delta < 2M."""
    mtbf = mtbf_h * HOUR  # delta <= 1 h < 2M = 1.02 h or more
    young = math.sqrt(2 * checkpoint * mtbf)
    assert young_interval_s(checkpoint, mtbf) == pytest.approx(young, rel=1e-12)
    daly = young * (1 + math.sqrt(checkpoint / (2 * mtbf)) / 3 + checkpoint / (18 * mtbf)) - checkpoint
    assert daly_interval_s(checkpoint, mtbf) == pytest.approx(daly, rel=1e-9)


def test_daly_switches_to_the_mtbf_at_a_checkpoint_of_two_mtbf():
    """At delta == 2M Daly's interval is M (the formula would give 2M x 13/9 - 2M = 8M/9); just below
    2M the formula holds, and beyond (2.5M, 3M) it stays M."""
    assert daly_interval_s(2 * M, M) == M
    below = 2 * M * (1 - 1e-12)
    assert daly_interval_s(below, M) == pytest.approx(8 * M / 9, rel=1e-6)
    assert daly_interval_s(2.5 * M, M) == M and daly_interval_s(3 * M, M) == M


# --- Daly's eq. 13 ---------------------------------------------------------------------------------


@SETTINGS
@given(length_h=st.floats(0.01, 50), mtbf_h=st.floats(0.5, 50), restart_s=st.floats(0, 3600))
def test_segment_time_is_dalys_eq_13_by_direct_evaluation(length_h, mtbf_h, restart_s):
    """E[segment] = M e^(R/M) (e^(L/M) - 1) for moderate values, where the direct form fits a float."""
    length, mtbf = length_h * HOUR, mtbf_h * HOUR
    direct = mtbf * math.exp(restart_s / mtbf) * math.expm1(length / mtbf)
    assert segment_time_s(length, mtbf, restart_s) == pytest.approx(direct, rel=1e-12)


@SETTINGS
@given(x=st.floats(29.0, 31.0))
def test_both_forms_of_ln_expm1_agree_around_30(x):
    """With M = 1 s and no restart a segment of x seconds takes e^x - 1: the form for x > 30 and the
    direct form for x <= 30 both give it to a few ulps (a sign slip costs 2 e^-x, 7e-14 at 31)."""
    assert segment_time_s(x, 1.0, 0.0) == pytest.approx(math.expm1(x), rel=1e-14)


@pytest.mark.parametrize("x", [29.999999, 30.0, 30.000001, 30.5, 31.0])
def test_ln_expm1_just_either_side_of_30(x):
    """Just below, at and just above the switch, the segment time is e^x - 1 to 1e-14."""
    assert segment_time_s(x, 1.0, 0.0) == pytest.approx(math.expm1(x), rel=1e-14)


def test_huge_segments_use_the_log_form_and_overflow_to_inf():
    """L/M = 700: e^700 fits a float (M (e^700 - 1) = e^700 s with M = 1 s); L/M = 800 or a restart of
    100 M on L/M = 700 does not, and the answer is inf rather than an OverflowError."""
    assert segment_time_s(700.0, 1.0, 0.0) == pytest.approx(math.exp(700), rel=1e-12)
    assert segment_time_s(700.0 * HOUR, HOUR, 0.0) == pytest.approx(HOUR * math.exp(700), rel=1e-12)
    assert segment_time_s(800.0, 1.0, 0.0) == math.inf
    assert segment_time_s(700.0, 1.0, 100.0) == math.inf


def test_a_segment_below_the_smallest_ratio_takes_its_length():
    """L/M rounds to 0 (5e-324 / 1e300): no failure within the segment, it takes L."""
    assert segment_time_s(5e-324, 1e300, 600.0) == 5e-324


# --- segments ----------------------------------------------------------------------------------------


def test_segments_full_intervals_and_the_remainder():
    """2.5 h of work in 1 h intervals: 2 full and 30 min; an exact division leaves 0; less than one
    interval is one remainder."""
    assert segments(9000.0, 3600.0) == (2, 1800.0)
    assert segments(7200.0, 3600.0) == (2, 0.0)
    assert segments(0.3, 0.1) == (3, 0.0)  # 0.3 / 0.1 = 2.9999999999999996: within 1e-12 of 3
    assert segments(1800.0, 3600.0) == (0, 1800.0)


def test_a_remainder_of_1e_9_of_the_interval_or_less_is_rounding():
    """The remainder is kept only above 1e-9 x min(work, interval): 1e9 + 1 s of work in 1e9 s
    intervals leaves exactly 1 s = 1e-9 x 1e9 (dropped), 1e9 + 2 s leaves 2 s (kept); 1 + 1e-12 s of
    work in 0.5 s intervals leaves ~1e-12 s, far below 5e-10 s (dropped)."""
    assert 1e-9 * 1e9 == 1.0 and (1e9 + 1.0) - 1e9 == 1.0  # the boundary is exact in floats
    assert segments(1e9 + 1.0, 1e9) == (1, 0.0)
    assert segments(1e9 + 2.0, 1e9) == (1, 2.0)
    assert segments(1 + 1e-12, 0.5) == (2, 0.0)
    assert expected_run(1 + 1e-12, interval_s=0.5, checkpoint_s=0.1, restart_s=0, mtbf_s=1e15).num_checkpoints == 2


@SETTINGS
@given(work=st.floats(1, 1e9), interval=st.floats(1, 1e6))
def test_segments_add_back_to_the_work(work, interval):
    """full x interval + remainder is the work, the remainder is below one interval."""
    full, rest = segments(work, interval)
    assert 0 <= rest < interval
    assert full * interval + rest == pytest.approx(work, rel=1e-9)


def test_more_checkpoints_than_a_float_counts_are_refused_naming_the_interval():
    """1e20 s of work in 1e-300 s intervals is beyond a float of checkpoints: refused, naming interval_s."""
    with pytest.raises(ClusterSimError, match=r"interval_s: .* is more than 1.8e\+308 checkpoints") as err:
        segments(1e20, 1e-300)
    assert err.value.field == "interval_s" and err.value.value == 1e-300
    assert "lengthen the interval" in str(err.value)


# --- Refusals of the inputs --------------------------------------------------------------------------

GOOD = {"work_s": DAY, "interval_s": HOUR, "checkpoint_s": 60.0, "restart_s": 600.0, "mtbf_s": M}


def _call(function, **changed):
    kw = {**GOOD, **changed}
    if function is expected_run:
        return expected_run(kw.pop("work_s"), **kw)
    if function is segments:
        return segments(kw["work_s"], kw["interval_s"])
    return function(kw["checkpoint_s"], kw["mtbf_s"])


INPUTS = [
    (young_interval_s, "checkpoint_s", "positive"),
    (young_interval_s, "mtbf_s", "positive"),
    (daly_interval_s, "checkpoint_s", "positive"),
    (daly_interval_s, "mtbf_s", "positive"),
    (segments, "work_s", "positive"),
    (segments, "interval_s", "positive"),
    (expected_run, "checkpoint_s", "zero or more"),
    (expected_run, "restart_s", "zero or more"),
    (expected_run, "mtbf_s", "positive"),
    (expected_run, "work_s", "positive"),
    (expected_run, "interval_s", "positive"),
]
# 0 is refused only where the input must be positive: a checkpoint or a restart may take no time
REFUSED = [(*case, value) for case in INPUTS for value in (-1.0, math.nan, math.inf, 0.0)]
REFUSED = [case for case in REFUSED if not (case[3] == 0 and case[2] == "zero or more")]


@pytest.mark.parametrize(("function", "field", "rule", "value"), REFUSED)
def test_each_input_is_refused_naming_itself_its_value_and_the_rule(function, field, rule, value):
    """Negative, NaN and inf are refused for every input, 0 for those that must be positive; the
    message, ``field`` and ``value`` name the input, what it got and the rule."""
    with pytest.raises(ClusterSimError) as err:
        _call(function, **{field: value})
    assert str(err.value) == f"{field}: must be a finite number, {rule}, got {value!r}"
    assert err.value.field == field
    assert math.isnan(err.value.value) if math.isnan(value) else err.value.value == value


def test_no_checkpoint_and_no_restart_cost_is_the_failure_only_run():
    """delta = 0 and R = 0: 1 h of work in one segment takes M (e^(1h/M) - 1), with M = 3 h
    3 h x (e^(1/3) - 1) = 1.2168 h; nothing is spent checkpointing or restarting."""
    run = expected_run(HOUR, interval_s=HOUR, checkpoint_s=0.0, restart_s=0.0, mtbf_s=M)
    assert run.expected_time_s == pytest.approx(M * math.expm1(1 / 3), rel=1e-12)
    assert run.checkpoint_total_s == 0 and run.restart_total_s == 0 and run.rework_s == run.lost_s > 0


# --- The expected run ------------------------------------------------------------------------------


def test_expected_run_bookkeeping_by_hand():
    """2.5 h of work in 1 h intervals, 60 s checkpoints, 600 s restarts, M = 10 h: two segments of
    3,660 s and one of 1,800 + 60 s, each M e^(R/M)(e^(L/M) - 1) = 9,775.5 s in all; three checkpoints
    (180 s), T/M = 0.2715 failures, 595.5 s lost of which 0.2715 x M (1 - e^(-600/36,000)) = 161.6 s restarts
    (each restart attempt cut short by a failure within it), 433.9 s rework."""
    mtbf = 10 * HOUR
    run = expected_run(9000.0, interval_s=HOUR, checkpoint_s=60.0, restart_s=600.0, mtbf_s=mtbf)

    def seg(length):
        return mtbf * math.exp(600 / mtbf) * math.expm1(length / mtbf)

    total = 2 * seg(3660.0) + seg(1860.0)
    assert run == Goodput(9000.0, HOUR, 60.0, 600.0, mtbf, run.expected_time_s, 3)
    assert run.expected_time_s == pytest.approx(total, rel=1e-12) and total == pytest.approx(9775.5003, rel=1e-7)
    assert run.goodput == pytest.approx(9000.0 / total, rel=1e-12)
    assert run.checkpoint_total_s == 180.0
    assert run.expected_failures == pytest.approx(total / mtbf, rel=1e-12)
    assert run.lost_s == pytest.approx(total - 9000.0 - 180.0, rel=1e-12)
    assert run.restart_total_s == pytest.approx(total / mtbf * mtbf * -math.expm1(-600.0 / mtbf), rel=1e-12)
    assert run.rework_s == pytest.approx(run.lost_s - run.restart_total_s, rel=1e-12)
    assert run.rework_s == pytest.approx(433.925, rel=1e-5)
    assert run.waiting_s == pytest.approx(180.0 + run.restart_total_s, rel=1e-12)


def test_restarts_cut_short_by_failures_stay_within_the_time_lost():
    """R = 10 M: a restart is mostly cut short by the next failure, so failures x R would overcount the time
    lost; failures x M (1 - e^(-R/M)) stays within it and leaves the 10 min segment's own rework."""
    run = expected_run(600.0, interval_s=HOUR, checkpoint_s=0.0, restart_s=10 * HOUR, mtbf_s=HOUR)
    assert run.expected_failures * run.restart_s > run.lost_s
    assert run.restart_total_s == pytest.approx(run.expected_failures * HOUR * -math.expm1(-10.0), rel=1e-12)
    assert 0 < run.rework_s < run.lost_s and run.rework_s == pytest.approx(run.lost_s - run.restart_total_s)
    assert run.waiting_s == run.restart_total_s and run.num_checkpoints == 1


@SETTINGS
@given(
    work_h=st.floats(1, 2000),
    interval_h=st.floats(0.1, 20),
    checkpoint=st.floats(0, 600),
    restart=st.floats(0, 3600),
    mtbf_h=st.floats(1, 100),
)
def test_goodput_identities(work_h, interval_h, checkpoint, restart, mtbf_h):
    """goodput = work / time; lost = time - work - checkpoints; restarts = failures x M (1 - e^(-R/M)), never
    above the time lost; rework = lost - restarts >= 0; waiting = checkpoints + restarts; a partial last segment
    is checkpointed too."""
    work, interval, mtbf = work_h * HOUR, interval_h * HOUR, mtbf_h * HOUR
    run = expected_run(work, interval_s=interval, checkpoint_s=checkpoint, restart_s=restart, mtbf_s=mtbf)
    full, rest = segments(work, interval)
    assert run.num_checkpoints == full + (1 if rest else 0)
    assert run.checkpoint_total_s == pytest.approx(run.num_checkpoints * checkpoint)
    assert run.goodput == pytest.approx(work / run.expected_time_s) and 0 < run.goodput <= 1
    assert run.expected_failures == pytest.approx(run.expected_time_s / mtbf)
    assert run.lost_s == pytest.approx(run.expected_time_s - work - run.checkpoint_total_s)
    assert run.restart_total_s == pytest.approx(run.expected_failures * mtbf * -math.expm1(-restart / mtbf))
    assert run.restart_total_s <= run.lost_s * (1 + 1e-9) + 1e-6
    assert run.rework_s == pytest.approx(run.lost_s - run.restart_total_s)
    assert run.waiting_s == pytest.approx(run.checkpoint_total_s + run.restart_total_s)


@pytest.mark.parametrize(
    ("work_s", "segments_text", "segment_s"),
    [
        (30 * DAY + 1800, "721 segments", 3660.0),  # 720 full intervals and 30 min: 721, each 1 h + 60 s
        (30 * DAY, "720 segments", 3660.0),  # an exact division: 720 of 1 h + 60 s
        (1800.0, "1 segments", 1860.0),  # only a remainder: one segment of 30 min + 60 s
    ],
)
def test_a_run_that_never_finishes_names_its_segments(work_s, segments_text, segment_s):
    """A restart of 1e300 s puts e^(R/M) beyond a float: refused, blaming the restart, with the count of
    segments and the length of the first (work between checkpoints plus the checkpoint)."""
    mtbf = 3.1 * HOUR
    with pytest.raises(ClusterSimError, match=r"^the run never finishes") as err:
        expected_run(work_s, interval_s=HOUR, checkpoint_s=60.0, restart_s=1e300, mtbf_s=mtbf)
    text = str(err.value)
    assert f"{segments_text} of {format_seconds(segment_s)} (work between" in text
    assert f"a job MTBF of {format_seconds(mtbf)} against a restart of {format_seconds(1e300)}" in text
    assert f"beyond {sys.float_info.max:.3g} s" in text
    assert text.endswith("shorten the restart or the checkpoint, or lengthen the interval")
    assert err.value.field == "restart_s" and err.value.value == 1e300


def test_a_segment_time_that_fits_a_float_is_returned_not_inf():
    """At exactly ln(float max) the expected time, 1.797e308 s, is a finite float and is returned; one step
    past it overflows to inf (a run that never finishes) rather than raising."""
    edge = math.log(sys.float_info.max)
    at_edge = failures.segment_time_s(100.0, 1.0, edge - 100.0)  # ln M + R/M + ln(e^100 - 1) = the edge
    assert math.isfinite(at_edge) and at_edge == pytest.approx(sys.float_info.max, rel=1e-12)
    assert failures.segment_time_s(100.0, 1.0, edge - 99.0) == math.inf
