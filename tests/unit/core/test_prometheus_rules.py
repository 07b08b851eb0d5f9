"""The alerting rules fleetd ships (contracts/prometheus/fleetd.rules.yml): promtool accepts them,
their unit tests pass, and every series they name is one fleetd's /metrics exposes."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.unit.core.test_metrics_from_start import PROMTOOL_TIMEOUT, _fleet, _promtool, _scrape

RULES_DIR = Path(__file__).resolve().parents[3] / "contracts" / "prometheus"
RULES = RULES_DIR / "fleetd.rules.yml"
RULE_TESTS = RULES_DIR / "fleetd.rules.test.yml"

#: PromQL words that look like series names.
_KEYWORDS = frozenset(
    {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right"}
    | {"bool", "offset", "inf", "nan"}
)
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def series_names(expr: str) -> set[str]:
    """The series names a PromQL expression selects (functions, keywords, label matchers,
    grouping labels, ranges and numbers left out)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings first: they may hold braces
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = _GROUPING.sub(" ", text)
    names = set()
    for match in _NAME.finditer(text):
        rest = text[match.end() :].lstrip()
        before = text[: match.start()]
        if rest.startswith("(") or match.group().lower() in _KEYWORDS:
            continue
        if before and (before[-1].isdigit() or before[-1] == "."):
            continue  # the unit of a number such as 5m, or an exponent
        names.add(match.group())
    return names


def _rule_exprs() -> list[str]:
    document = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return [str(rule["expr"]) for group in document["groups"] for rule in group["rules"]]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_promtool(), *args],
        capture_output=True,
        text=True,
        timeout=PROMTOOL_TIMEOUT,
        check=False,
        cwd=RULES_DIR,
    )


def test_promtool_checks_the_rules() -> None:
    """``promtool check rules`` accepts the rules file (syntax, PromQL, templates)."""
    checked = _run("check", "rules", RULES.name)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_promtool_unit_tests_of_the_rules_pass() -> None:
    """``promtool test rules``: each alert fires on fleetd's series and stays quiet otherwise."""
    tested = _run("test", "rules", RULE_TESTS.name)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_the_name_reader_finds_series_and_nothing_else() -> None:
    """The expression reader keeps series names and drops functions, labels and keywords."""
    expr = (
        'histogram_quantile(0.99, sum by (job, le) (rate(a_bucket{x="{y}"}[5m]))) > 1e3 '
        "and on (job) b_total unless ignoring(le) c offset 5m"
    )
    assert series_names(expr) == {"a_bucket", "b_total", "c"}


async def test_every_series_the_rules_name_is_one_fleetd_exposes(tmp_path: Path) -> None:
    """Each series in the rules' expressions is in /metrics of a fleetd built as `serve` builds
    it (health on, webhook mode; its receivers' series appear once the sink made a delivery
    pass): no alert is written on a name fleetd does not have."""
    fleet = _fleet(tmp_path)
    await fleet.service.sink.step()
    text = await _scrape(fleet)
    exposed = {
        sample.name for family in text_string_to_metric_families(text) for sample in family.samples
    }
    used = set().union(*(series_names(expr) for expr in _rule_exprs()))
    assert len(used) >= 6
    assert sorted(used - exposed) == []
    assert "fleet_health_incidents" in used  # the series with the routing label
    assert 'route="human"' in RULES.read_text(encoding="utf-8")
