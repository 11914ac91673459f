"""The make_raw factory the conformance tests of every shipped provider hand to the kit."""

from __future__ import annotations

from typing import Any

import httpx

from loom_nb.providers import ProviderUnderTest
from loom_nb.providers._http import RetryPolicy
from loom_nb.providers.conformance import CONFORMANCE_API_KEY


def raw_factory(cls: Any, model: str) -> Any:
    """A make_raw factory: providers keyed CONFORMANCE_API_KEY answering one canned status and body."""

    def make(status: int, body: bytes, content_type: str) -> ProviderUnderTest:
        log: list[httpx.Request] = []

        def handler(request: httpx.Request) -> httpx.Response:
            log.append(request)
            return httpx.Response(status, content=body, headers={"content-type": content_type})

        client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
        provider = cls(
            model,
            api_key=CONFORMANCE_API_KEY,
            http_client=client,
            retry_policy=RetryPolicy(max_retries=0),
        )
        return ProviderUnderTest(provider, lambda: [r.content for r in log])

    return make
