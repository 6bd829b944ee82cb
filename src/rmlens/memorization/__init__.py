"""rmlens.memorization"""
