"""Where the MockCluster answers each API, and at which versions: one module per API or API family, each
declaring the versions it serves (VERSIONS) in its first lines.

    produce.py            Produce
    fetch.py              Fetch
    list_offsets.py       ListOffsets
    metadata.py           Metadata, DescribeCluster
    topics.py             CreateTopics, DeleteTopics
    init_producer_id.py   InitProducerId (with a transactional id, handed to txn_coordinator.py)
    find_coordinator.py   FindCoordinator
    txn_coordinator.py    AddPartitionsToTxn, AddOffsetsToTxn, EndTxn
    group_coordinator.py  OffsetCommit, TxnOffsetCommit, OffsetFetch, ListGroups
    sasl.py               SaslHandshake, SaslAuthenticate (answered by the server: they act on the connection)
    here                  ApiVersions, whose answer is this table

Each module's SERVED maps an API to its handler (request body in, response body out) and to the answer it
gives when a fault forces an error onto the whole request. Handlers run on the server thread with the cluster
lock held. They see the broker a request arrived at, so leadership is checked as a real broker checks it.
"""

from __future__ import annotations

from kafkajet.protocol import SUPPORTED_VERSIONS, ApiKey
from kafkajet.testing.mock.handlers import (
    fetch,
    find_coordinator,
    group_coordinator,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
    topics,
    txn_coordinator,
)
from kafkajet.testing.mock.handlers import sasl as sasl_apis
from kafkajet.testing.mock.requests import Answer, Body, ErrorBody, Handler, Request, Served, Versions, code
from kafkajet.testing.mock.sasl import SASL_APIS
from kafkajet.testing.mock.state import ClusterState

VERSIONS: Versions = {ApiKey.API_VERSIONS: (0, 4)}


def api_versions_body(error: str | None = None, sasl: bool = False) -> Body:
    keys = [{"api_key": int(api), "min_version": lo, "max_version": hi}
            for api, (lo, hi) in advertised(sasl).items()]
    return {"error_code": code(error) if error else 0, "api_keys": keys, "throttle_time_ms": 0}


def handle_api_versions(state: ClusterState, req: Request) -> Answer:
    return Answer(api_versions_body(sasl=bool(state.config.sasl_mechanisms)))


def _api_versions_error(state: ClusterState, req: Request, error: str) -> Body:
    return api_versions_body(error, sasl=bool(state.config.sasl_mechanisms))


_MODULES = (produce, fetch, list_offsets, metadata, topics, init_producer_id, find_coordinator, txn_coordinator,
            group_coordinator)


def _collect() -> tuple[dict[ApiKey, Served], Versions, Versions]:
    """Every module's table, checked: (served APIs, their versions, the SASL APIs' versions)."""
    served: dict[ApiKey, Served] = {ApiKey.API_VERSIONS: Served(handle_api_versions, _api_versions_error)}
    versions: Versions = dict(VERSIONS)
    for module in _MODULES:
        if set(module.SERVED) != set(module.VERSIONS):
            raise AssertionError(f"{module.__name__}: SERVED and VERSIONS name different APIs")
        served.update(module.SERVED)
        versions.update(module.VERSIONS)
    if set(sasl_apis.VERSIONS) != set(SASL_APIS):
        raise AssertionError("handlers/sasl.py and kafkajet.testing.mock.sasl name different SASL APIs")
    for api, (lo, hi) in {**versions, **sasl_apis.VERSIONS}.items():
        codec_lo, codec_hi = SUPPORTED_VERSIONS[api]
        if not codec_lo <= lo <= hi <= codec_hi:
            # Advertising a version the codec cannot decode would fail clients at their first request.
            raise AssertionError(f"{api.name} v{lo}-{hi} served, but the codec speaks v{codec_lo}-{codec_hi}")
    return served, versions, dict(sasl_apis.VERSIONS)


_SERVED, _VERSIONS, _SASL_VERSIONS = _collect()
HANDLERS: dict[ApiKey, Handler] = {api: served.handle for api, served in _SERVED.items()}
_ERRORS: dict[ApiKey, ErrorBody] = {**{api: served.error_body for api, served in _SERVED.items()},
                                    **sasl_apis.ERRORS}


def advertised(sasl: bool = False) -> dict[ApiKey, tuple[int, int]]:
    """What ApiVersions lists: every API with a handler at the versions its module declares, and with `sasl`
    the SASL APIs (the server answers those itself: they act on the connection)."""
    return dict(sorted({**_VERSIONS, **(_SASL_VERSIONS if sasl else {})}.items()))


def error_response(state: ClusterState, req: Request, error: str) -> Body:
    """The response a broker would give if every partition/topic of the request failed with `error`."""
    api = ApiKey(req.header.api_key)
    if api not in _ERRORS:
        raise ValueError(f"no error response shape for api key {api}")
    return _ERRORS[api](state, req, error)
