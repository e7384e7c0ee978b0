"""The built-in `data` skill on real CSV, TSV, JSON and JSON Lines files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from skill_factory import call, context

from orchestrator.agent import Tool, ToolContext
from orchestrator.errors import PermissionDenied, ToolError
from orchestrator.skills import SkillCatalog

SALES = """region,product,amount,units,paid,date
north,apple,10.5,3,true,2024-01-05
south,pear,4,1,false,2024-01-06
north,pear,7.25,2,true,2024-02-01
east,apple,,5,true,2024-02-03
south,apple,12,4,false,2024-03-10
"""


@pytest.fixture(scope="module")
def data() -> dict[str, Tool]:
    return {t.name.removeprefix("data__"): t for t in SkillCatalog().load("data").tools}


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    (tmp_path / "sales.csv").write_text(SALES)
    (tmp_path / "sales.tsv").write_text(SALES.replace(",", "\t"))
    (tmp_path / "semi.csv").write_text(SALES.replace(",", ";"))
    records = [{"name": "ann", "age": 31, "tags": ["a"]}, {"name": "bob", "age": 25}]
    (tmp_path / "people.json").write_text(json.dumps({"meta": {"n": 2}, "people": records}))
    (tmp_path / "nested.json").write_text(json.dumps({"data": {"rows": records}}))
    (tmp_path / "people.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return context(tmp_path)


async def test_summarize_a_csv(data: dict[str, Tool], ctx: ToolContext) -> None:
    out = await call(data["summarize"], ctx, path="sales.csv")
    lines = out.splitlines()
    assert lines[0] == "sales.csv: 5 rows, 6 columns"
    assert lines[1] == (
        "- region (string): 5 values, 0 missing, 3 distinct; top: 'north' (2), 'south' (2), "
        "'east' (1)"
    )
    assert lines[3] == (
        "- amount (number): 4 values, 1 missing, 4 distinct; min 4.0, max 12.0, mean 8.438, "
        "median 8.875, sum 33.75"
    )
    assert lines[4].startswith("- units (integer): 5 values, 0 missing, 5 distinct; min 1, max 5")
    assert lines[5].startswith("- paid (boolean): 5 values")
    assert lines[6].startswith("- date (date): 5 values, 0 missing, 5 distinct; range 2024-01-05")
    assert "First rows:\nregion | product | amount | units | paid | date" in out


@pytest.mark.parametrize("path", ["sales.tsv", "semi.csv"])
async def test_other_delimiters(data: dict[str, Tool], ctx: ToolContext, path: str) -> None:
    out = await call(data["summarize"], ctx, path=path)
    assert out.startswith(f"{path}: 5 rows, 6 columns")
    assert "- amount (number)" in out


@pytest.mark.parametrize(
    ("path", "records"),
    [("people.json", None), ("nested.json", "data.rows"), ("people.jsonl", None)],
)
async def test_json_records(
    data: dict[str, Tool], ctx: ToolContext, path: str, records: str | None
) -> None:
    out = await call(data["summarize"], ctx, path=path, records=records)
    assert out.startswith(f"{path}: 2 rows, 3 columns")
    assert "- age (integer): 2 values, 0 missing, 2 distinct; min 25, max 31" in out
    assert "- tags (json): 1 values, 1 missing" in out


async def test_json_errors(data: dict[str, Tool], ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{oops")
    with pytest.raises(ToolError, match="not valid JSON"):
        await call(data["summarize"], ctx, path="bad.json")
    with pytest.raises(ToolError, match="no key 'nope'"):
        await call(data["summarize"], ctx, path="nested.json", records="data.nope")


async def test_query_filters_sorts_and_picks_columns(
    data: dict[str, Tool], ctx: ToolContext
) -> None:
    out = await call(
        data["query"],
        ctx,
        path="sales.csv",
        columns=["region", "amount"],
        where=[{"column": "amount", "op": ">", "value": "5"}, {"column": "paid", "value": True}],
        sort_by="amount",
        descending=True,
    )
    assert out == "2 of 5 rows match; showing 2\nregion | amount\nnorth | 10.5\nnorth | 7.25"


async def test_query_operators(data: dict[str, Tool], ctx: ToolContext) -> None:
    async def regions(**condition: object) -> list[str]:
        out = await call(
            data["query"], ctx, path="sales.csv", columns=["region"], where=[condition]
        )
        return out.splitlines()[2:]

    assert await regions(column="region", op="in", value=["east", "south"]) == [
        "south",
        "east",
        "south",
    ]
    assert await regions(column="product", op="contains", value="PEA") == ["south", "north"]
    assert await regions(column="amount", op="=", value=None) == ["east"]
    assert await regions(column="date", op=">=", value="2024-02-03") == ["east", "south"]
    assert await regions(column="units", op="!=", value=3) == ["south", "north", "east", "south"]


async def test_query_limit_and_errors(data: dict[str, Tool], ctx: ToolContext) -> None:
    out = await call(data["query"], ctx, path="sales.csv", limit=2)
    assert out.splitlines()[0] == "5 of 5 rows match; showing 2"
    with pytest.raises(ToolError, match="no column 'price'; the columns are: region"):
        await call(data["query"], ctx, path="sales.csv", columns=["price"])
    with pytest.raises(ToolError, match="not a number"):
        await call(
            data["query"],
            ctx,
            path="sales.csv",
            where=[{"column": "amount", "op": ">", "value": "x"}],
        )


async def test_aggregate_by_group(data: dict[str, Tool], ctx: ToolContext) -> None:
    out = await call(
        data["aggregate"],
        ctx,
        path="sales.csv",
        metrics=["count", "sum:amount", "mean:units", "count_distinct:product", "max:date"],
        group_by=["region"],
        sort_by="sum(amount)",
    )
    assert out.splitlines() == [
        "3 groups",
        "region | count | sum(amount) | mean(units) | count_distinct(product) | max(date)",
        "north | 2 | 17.75 | 2.5 | 2 | 2024-02-01",
        "south | 2 | 16.0 | 2.5 | 2 | 2024-03-10",
        "east | 1 |  | 5.0 | 1 | 2024-02-03",
    ]


async def test_aggregate_without_groups_and_with_a_filter(
    data: dict[str, Tool], ctx: ToolContext
) -> None:
    out = await call(
        data["aggregate"],
        ctx,
        path="sales.csv",
        metrics=["count", "median:amount", "min:units"],
        where=[{"column": "product", "value": "apple"}],
    )
    assert out.splitlines() == [
        "all matching rows",
        "count | median(amount) | min(units)",
        "3 | 11.25 | 3",
    ]


async def test_aggregate_errors(data: dict[str, Tool], ctx: ToolContext) -> None:
    for metrics, message in (
        (["total:amount"], "unknown metric 'total'"),
        (["sum"], "needs a column"),
        (["sum:region"], "numeric column"),
    ):
        with pytest.raises(ToolError, match=message):
            await call(data["aggregate"], ctx, path="sales.csv", metrics=metrics)
    with pytest.raises(ToolError, match="sort_by must be one of"):
        await call(data["aggregate"], ctx, path="sales.csv", sort_by="amount")


async def test_files_stay_in_the_workspace(data: dict[str, Tool], ctx: ToolContext) -> None:
    with pytest.raises(PermissionDenied):
        await call(data["summarize"], ctx, path="../sales.csv")
    with pytest.raises(ToolError, match="no file"):
        await call(data["summarize"], ctx, path="missing.csv")
