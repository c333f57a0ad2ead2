"""The `meshemu` command line."""


def main() -> int:
    raise SystemExit("meshemu: not built yet")
