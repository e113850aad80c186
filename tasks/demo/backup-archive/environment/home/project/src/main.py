from app.cli import run

if __name__ == "__main__":
    run(port=8000)
