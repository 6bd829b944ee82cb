"""rmlens.rewards"""
