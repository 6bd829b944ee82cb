"""rmlens.generalization"""
