"""Commands over a run folder that sit above the sweep: rescore, watch mode, batch administration.
"""
