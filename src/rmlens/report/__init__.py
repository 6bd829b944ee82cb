"""rmlens.report"""
