"""The web console in a real headless browser: Chromium (the distribution's package) driven by Selenium
against a real `dpsql serve`. Log in as an analyst, run a query, see its chart; then as the data owner,
see the charge. Skipped where Chromium, its driver or Selenium is missing (`.ci/run` installs them:
`apt-get install chromium chromium-driver`)."""

from __future__ import annotations

import shutil

import pytest
from console_deployment import OWNER, OWNER_PASSWORD, ServedConsole, with_console

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

BROWSER = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
                if shutil.which(name)), None)
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(BROWSER is None or DRIVER is None,
                                reason="no Chromium and chromedriver (apt-get install chromium chromium-driver)")
QUERY = "SELECT sex, COUNT(*) AS n FROM people WHERE age >= 18 GROUP BY sex ORDER BY sex"


@pytest.fixture()
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = BROWSER
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--window-size=1280,1600"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)  # a local driver: nothing downloaded
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def log_in(driver, url: str, name: str, password: str) -> None:
    driver.get(url + "login")
    driver.find_element(By.ID, "name").send_keys(name)
    driver.find_element(By.ID, "password").send_keys(password)
    driver.find_element(By.ID, "submit").click()
    WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.ID, "who"))


def test_an_analyst_queries_and_sees_the_chart_then_the_owner_sees_the_charge(browser, tmp_path):
    with ServedConsole(with_console(tmp_path)) as served:
        log_in(browser, served.url, "alice", "alice-pw")
        assert browser.current_url == served.url + "analyst"
        browser.find_element(By.ID, "sql").send_keys(QUERY)
        browser.find_element(By.ID, "run").click()
        wait = WebDriverWait(browser, 60)
        bars = wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#answers svg.chart rect.bar"))
        assert len(bars) == 2 and all(bar.size["height"] > 10 and bar.size["width"] > 10 for bar in bars)
        whiskers = browser.find_elements(By.CSS_SELECTOR, "#answers svg.chart g.interval")
        assert len(whiskers) == 2 and all(w.is_displayed() for w in whiskers)
        labels = [t.text for t in browser.find_elements(By.CSS_SELECTOR, "#answers svg.chart text")]
        assert "F" in labels and "M" in labels
        cells = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "#answers table.rows td")]
        assert cells[0] == "F" and "±" in cells[1]
        assert "charged ε=0.1" in browser.find_element(By.CSS_SELECTOR, "#answers .charge").text
        assert browser.find_elements(By.CSS_SELECTOR, "#charges td code")[0].text == QUERY

        browser.find_element(By.ID, "logout").click()
        wait.until(lambda d: d.find_elements(By.ID, "login"))
        log_in(browser, served.url, OWNER, OWNER_PASSWORD)
        assert browser.current_url == served.url + "owner"
        assert browser.find_element(By.ID, "verification").text.startswith("intact: hash chain and budget verified")
        rows = [[td.text for td in tr.find_elements(By.TAG_NAME, "td")]
                for tr in browser.find_elements(By.CSS_SELECTOR, "#charges tbody tr")]
        assert len(rows) == 1 and rows[0][2] == "alice" and rows[0][3] == "people" and rows[0][6] == QUERY
        spending = browser.find_elements(By.CSS_SELECTOR, "#spending svg.chart polyline.series")
        assert len(spending) == 2 and all(line.is_displayed() for line in spending)  # everyone's and alice's
        assert len(browser.find_elements(By.CSS_SELECTOR, "#remaining svg.chart polyline.series")) == 4
        analysts = {tr.find_elements(By.TAG_NAME, "td")[0].text: tr.find_elements(By.TAG_NAME, "td")[4].text
                    for tr in browser.find_elements(By.CSS_SELECTOR, "#analysts tbody tr")}
        assert analysts == {"alice": "1", "bob": "0", "carol": "0"}
