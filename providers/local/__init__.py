"""Locally served models: fasteval starts, supervises, routes to and stops their servers (vLLM by default)."""

from providers.breaker import EndpointDown
from providers.local.fingerprint import checkpoint_identity
from providers.local.gpus import GpuConfigError, GpuPool, detect_gpus
from providers.local.routing import RoutedProvider, Router, parse_metrics, trajectory
from providers.local.spec import ServeConfigError, ServeSpec
from providers.local.supervisor import Replica, ServerGroup, ServerStartError

__all__ = ["EndpointDown", "GpuConfigError", "GpuPool", "Replica", "RoutedProvider", "Router", "ServeConfigError",
           "ServeSpec", "ServerGroup", "ServerStartError", "checkpoint_identity", "detect_gpus", "parse_metrics",
           "trajectory"]
