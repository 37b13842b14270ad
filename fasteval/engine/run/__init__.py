"""The hot path: the sweep, admission under the global cap, a job's life, the agent loop, model
clients, served models, the run's runtime, preflight and the progress panel.

May import the rooms on the floor below (steer, batch, forecast) and the engine's floor.
"""
