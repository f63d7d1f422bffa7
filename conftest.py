from cacheproof.settings import register_settings

register_settings()
