def slug(s: str) -> str:
    return "-".join(s.lower().split())[:64]
