"""rmlens.tokens"""
