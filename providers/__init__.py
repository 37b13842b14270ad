"""providers: the model side of fasteval, one face for the layers above it.

The registry (``registry.py``: every provider and wire, one table), the request and response
vocabulary (``base.py``), the model client with its retries, limits and breaker (``client.py``,
``retry.py``, ``limits.py``, ``breaker.py``), the batch APIs (``batch/``), the served models
(``local/``) and the embedded sim (``sim/``). ``fasteval`` imports these names from here, never a
module of this package (``tests/architecture/test_providers_face.py``); the modules inside
import each other directly.

The names below load their module on first use, so naming one (a ``ProviderKind`` for ``fasteval
report``) never imports aiohttp, the wires or the sim.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fasteval.core.face import lazy_face

# isort: off
if TYPE_CHECKING:  # ``name as name`` re-exports it, for the type checker
    from providers.base import (
        TOOL_IMAGES_PREFIX as TOOL_IMAGES_PREFIX, Capabilities as Capabilities, ChatRequest as ChatRequest,
        ChatResponse as ChatResponse, Provider as Provider, ProviderError as ProviderError,
        ToolCallRequest as ToolCallRequest,
    )
    from providers.batch.base import (
        BatchInfo as BatchInfo, BatchSettings as BatchSettings, BatchWire as BatchWire,
        ResultLine as ResultLine, custom_id_ok as custom_id_ok,
    )
    from providers.body import ByteBudget as ByteBudget
    from providers.breaker import (
        BreakerPolicy as BreakerPolicy, CircuitBreaker as CircuitBreaker, EndpointDown as EndpointDown,
    )
    from providers.client import (
        BatchRoute as BatchRoute, EndpointStats as EndpointStats, ModelClient as ModelClient,
        RequestGate as RequestGate,
        ResponseCache as ResponseCache,
    )
    from providers.http_json import Timeouts as Timeouts
    from providers.limits import AdaptiveLimit as AdaptiveLimit
    from providers.local.fingerprint import checkpoint_identity as checkpoint_identity
    from providers.local.gpus import (
        GpuConfigError as GpuConfigError, GpuPool as GpuPool, detect_cpus as detect_cpus,
        detect_gpus as detect_gpus, usable_cpus as usable_cpus,
    )
    from providers.local.routing import RoutedProvider as RoutedProvider, Router as Router
    from providers.local.spec import (
        ServeConfigError as ServeConfigError, ServeSpec as ServeSpec, check_api_servers as check_api_servers,
        missing_vllm_message as missing_vllm_message,
    )
    from providers.local.supervisor import (
        Replica as Replica, ServerGroup as ServerGroup, ServerStartError as ServerStartError,
    )
    from providers.openai_compat import ImageUrlResolver as ImageUrlResolver
    from providers.registry import (
        ProviderKind as ProviderKind, WireArgs as WireArgs, batch_providers as batch_providers,
        batch_wire as batch_wire, batch_wires as batch_wires, is_embedded as is_embedded,
        make_provider as make_provider, price_terms as price_terms, provider_kind as provider_kind,
        providers as providers, token_rule as token_rule,
    )
    from providers.retry import (
        MODEL_RETRYABLE as MODEL_RETRYABLE, UPSTREAM_RETRYABLE as UPSTREAM_RETRYABLE,
        RetryPolicy as RetryPolicy, classify_status as classify_status, retry_call as retry_call,
    )
    from providers.sim.policies import POLICIES as POLICIES
    from providers.sim.server import SimServer as SimServer
    from providers.sim.spec import SimModel as SimModel
    from providers.token_rules import TokenRule as TokenRule
# isort: on

__getattr__, __all__ = lazy_face("providers", {
    "providers.base": ("TOOL_IMAGES_PREFIX", "Capabilities", "ChatRequest", "ChatResponse", "Provider",
                       "ProviderError", "ToolCallRequest"),
    "providers.batch.base": ("BatchInfo", "BatchSettings", "BatchWire", "ResultLine", "custom_id_ok"),
    "providers.body": ("ByteBudget",),
    "providers.breaker": ("BreakerPolicy", "CircuitBreaker", "EndpointDown"),
    "providers.client": ("BatchRoute", "EndpointStats", "ModelClient", "RequestGate", "ResponseCache"),
    "providers.http_json": ("Timeouts",),
    "providers.limits": ("AdaptiveLimit",),
    "providers.local.fingerprint": ("checkpoint_identity",),
    "providers.local.gpus": ("GpuConfigError", "GpuPool", "detect_cpus", "detect_gpus", "usable_cpus"),
    "providers.local.routing": ("RoutedProvider", "Router"),
    "providers.local.spec": ("ServeConfigError", "ServeSpec", "check_api_servers", "missing_vllm_message"),
    "providers.local.supervisor": ("Replica", "ServerGroup", "ServerStartError"),
    "providers.openai_compat": ("ImageUrlResolver",),
    "providers.registry": ("ProviderKind", "WireArgs", "batch_providers", "batch_wire", "batch_wires",
                           "is_embedded", "make_provider", "price_terms", "provider_kind", "providers", "token_rule"),
    "providers.retry": ("MODEL_RETRYABLE", "UPSTREAM_RETRYABLE", "RetryPolicy", "classify_status", "retry_call"),
    "providers.sim.policies": ("POLICIES",),
    "providers.sim.server": ("SimServer",),
    "providers.sim.spec": ("SimModel",),
    "providers.token_rules": ("TokenRule",),
})
