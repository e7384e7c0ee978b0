"""The shared endpoint: one client per event loop, and the gate that bounds calls in flight."""

from __future__ import annotations

import asyncio

import httpx

from orchestrator.models.http import Endpoint, _Gate


async def test_a_cancelled_waiter_does_not_lose_a_place() -> None:
    gate = _Gate()
    assert await gate.enter(1) is False
    waiter = asyncio.create_task(gate.enter(1))
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    gate.leave()
    assert await asyncio.wait_for(gate.enter(1), 1) is False
    assert gate.active == 1


async def test_waiters_enter_in_turn_as_places_free_up() -> None:
    gate = _Gate()
    await gate.enter(1)
    order: list[int] = []

    async def worker(n: int) -> None:
        assert await gate.enter(1) is True
        order.append(n)
        await asyncio.sleep(0.01)
        gate.leave()

    tasks = [asyncio.create_task(worker(n)) for n in range(3)]
    await asyncio.sleep(0.01)
    gate.leave()
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2]
    assert gate.active == 0


async def test_each_caller_brings_its_own_limit() -> None:
    gate = _Gate()
    await gate.enter(2)
    assert await asyncio.wait_for(gate.enter(2), 1) is False
    strict = asyncio.create_task(gate.enter(2))
    await asyncio.sleep(0.01)
    assert not strict.done()
    assert await asyncio.wait_for(gate.enter(3), 1) is False  # a looser limit still fits
    strict.cancel()


def test_one_client_per_event_loop_and_finished_loops_are_dropped() -> None:
    endpoint = Endpoint("http://127.0.0.1:9")

    async def client() -> httpx.AsyncClient:
        first = endpoint.client()
        assert endpoint.client() is first  # shared within a loop
        return first

    finished = asyncio.new_event_loop()  # kept alive here, as open connections would keep it
    one = finished.run_until_complete(client())
    finished.close()
    assert finished in endpoint._loops
    two = asyncio.run(client())
    assert one is not two
    assert finished not in endpoint._loops  # dropped when the next loop made its client


async def test_aclose_closes_this_loops_client() -> None:
    endpoint = Endpoint("http://127.0.0.1:9")
    first = endpoint.client()
    await endpoint.aclose()
    assert first.is_closed
    assert endpoint.client() is not first
    await endpoint.aclose()
