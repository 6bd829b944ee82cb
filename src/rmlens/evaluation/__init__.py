"""rmlens.evaluation"""
