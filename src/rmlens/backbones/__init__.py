"""rmlens.backbones"""
