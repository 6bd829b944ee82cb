"""rmlens.data"""
