"""Final state of rename-photos: camera names renamed by date, others untouched, renames logged."""

import hashlib
from pathlib import Path

PHOTOS = Path("/home/user/photos")
LOG = PHOTOS / "rename_log.txt"

# old name -> (new name, sha256 of the content, which must travel with the rename)
RENAMED = {
    "IMG_20230105_101500.jpg": ("2023-01-05_101500.jpg", "1805d8e5bdba3545aae06f9c5dbceef4cd8a5719f83ced2352b82f81c142336f"),
    "IMG_20230105_101512.jpg": ("2023-01-05_101512.jpg", "3019d0d48e03524272dbf1c921ef8088bb65a4109a99eafb6b58ab44ce9c0bb6"),
    "IMG_20230214_183004.jpg": ("2023-02-14_183004.jpg", "265b19856ca26b452dbb9934bb294e15abd6094923ea7801950e3b0db0e4cb19"),
    "IMG_20230401_070059.jpg": ("2023-04-01_070059.jpg", "b4c64c1da553c91ff7ebf6281825410b4dcaab40822e0a2885c02e7373afa011"),
    "IMG_20230618_120000.jpg": ("2023-06-18_120000.jpg", "37cf7a603a65ab87f7414d7f8e2e30ac381cabf2b41e09a436336b29e731362c"),
    "IMG_20230618_120001.jpg": ("2023-06-18_120001.jpg", "c0fa72a8cafd93a3e376ce63095f3aa0447e8b156245948d97db7ae9b6c04a75"),
    "IMG_20231031_235959.jpg": ("2023-10-31_235959.jpg", "6c5e8d689fe5f91d71d58adc9378dbda4299a83e188fff2e4d18d680bbbb317f"),
    "IMG_20231225_091530.jpg": ("2023-12-25_091530.jpg", "03aad35917e6362acfa3d093f6471c37c1ccb39c6c979e890e71a1ac7e948cbc"),
}
UNTOUCHED = {
    "IMG_1234.jpg": "c9b357e3bd69c7be6411a37971327de63e080276f5460eafd705b6cc7b8196e6",
    "IMG_20230312_090000.JPG": "7e3031d22be08357f4b2ceb20430f9d4bcc59e6f7992fe18b2aa6ae886e9fa9f",
    "IMG_20230501_1200.jpg": "82226373f47be759e65247195c4fc7e31a955fa4be378f859d114d19365d63eb",
    "README.txt": "ad214fabd7614819d7df07eb042cf7d4592f5730f59a3b69e8838f0a97022f5e",
}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_old_camera_names_are_gone():
    left = [old for old in RENAMED if (PHOTOS / old).exists()]
    assert not left, f"these files should have been renamed: {left}"


def test_new_names_hold_the_original_content():
    for old, (new, digest) in RENAMED.items():
        path = PHOTOS / new
        assert path.is_file(), f"{path} is missing (renamed from {old})"
        assert sha256(path) == digest, f"{path} does not hold the content of {old}"


def test_non_matching_files_untouched():
    for name, digest in UNTOUCHED.items():
        path = PHOTOS / name
        assert path.is_file(), f"{path} should have been left in place"
        assert sha256(path) == digest, f"{path} was modified"


def test_no_extra_jpg_files():
    jpgs = sorted(p.name for p in PHOTOS.iterdir() if p.suffix.lower() == ".jpg")
    expected = sorted([new for new, _ in RENAMED.values()] + [n for n in UNTOUCHED if n != "README.txt"])
    assert jpgs == expected, f"photo files in {PHOTOS} should be {expected}, found {jpgs}"


def test_rename_log():
    assert LOG.is_file(), f"{LOG} is missing"
    text = LOG.read_text()
    assert text.endswith("\n"), f"{LOG} must end with a newline"
    expected = [f"{old} {new}" for old, (new, _) in sorted(RENAMED.items())]
    lines = text.split("\n")[:-1]
    assert lines == expected, f"{LOG} should be {expected}, found {lines}"
