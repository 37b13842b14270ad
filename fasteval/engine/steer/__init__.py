"""Steering a running sweep: the controller behind ``fasteval ctl``, its socket, and ``notify:``.

Imports only the engine's floor (plan, ledger), never the hot path that it steers.
"""
