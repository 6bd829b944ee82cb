"""rmlens.attribution"""
