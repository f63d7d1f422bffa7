from cacheproof.settings import register_profiles

register_profiles()
