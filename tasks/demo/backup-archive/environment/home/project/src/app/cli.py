def run(port: int = 8000) -> None:
    print(f"serving on {port}")
