from app.util.strings import slug


def test_slug():
    assert slug("A B 2") == "a-b-2"
