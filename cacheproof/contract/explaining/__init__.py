"""A divergence of any spec kind in words: how one report names its values (`names`) and every
difference at a diverging call with why it matters (`steps`)."""
