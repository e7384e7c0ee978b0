"""The server-sent-events decoder both adapters read streams with."""

from __future__ import annotations

from orchestrator.models.http import ServerSentEvent, SSEDecoder, iter_events


def test_events_are_split_at_blank_lines_and_named() -> None:
    body = 'event: ping\ndata: {"type": "ping"}\n\ndata: one\n\n'
    assert list(iter_events(body)) == [
        ServerSentEvent("ping", '{"type": "ping"}'),
        ServerSentEvent("message", "one"),
    ]


def test_multi_line_data_comments_and_unknown_fields() -> None:
    body = ": keep-alive\nid: 7\nretry: 100\ndata: first\ndata:second\n\n"
    assert list(iter_events(body)) == [ServerSentEvent("message", "first\nsecond")]


def test_crlf_line_endings() -> None:
    assert list(iter_events("data: a\r\n\r\ndata: b\r\n\r\n")) == [
        ServerSentEvent("message", "a"),
        ServerSentEvent("message", "b"),
    ]


def test_an_event_without_a_final_blank_line_is_still_delivered() -> None:
    assert list(iter_events("event: message_stop\ndata: {}")) == [
        ServerSentEvent("message_stop", "{}")
    ]


def test_an_event_name_without_data_is_dropped() -> None:
    decoder = SSEDecoder()
    assert decoder.feed("event: ping") is None
    assert decoder.feed("") is None
    assert decoder.feed("data: x") is None
    assert decoder.feed("") == ServerSentEvent("message", "x")
