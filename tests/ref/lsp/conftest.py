# pytest-lsp's tests are coroutines: pytest-asyncio runs them (auto mode).
def pytest_configure(config):
    config.option.asyncio_mode = "auto"
