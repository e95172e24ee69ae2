// Drives the chat page of `dlm api` on a vision-language base in headless
// Chromium: attaches each image with the page's image button, sends an
// empty message (a caption), waits for the streamed answer, and prints the
// answers, the images shown in the page and any request to elsewhere.
// usage: node vl_page.cjs BASE_URL SCREENSHOT IMAGE...
"use strict";
const { chromium } = require("playwright-core");

(async () => {
  const [base, shot, ...images] = process.argv.slice(2);
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu"],
  });
  const page = await browser.newPage({ viewport: { width: 900, height: 640 } });
  const foreign = [];
  page.on("request", (r) => { if (!r.url().startsWith(base) && !r.url().startsWith("data:")) foreign.push(r.url()); });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(base);
  await page.waitForSelector("#model option", { state: "attached" });
  await page.fill("#temp", "0");
  await page.fill("#maxtok", "12");
  const answers = [];
  for (const [n, img] of images.entries()) {
    await page.setInputFiles("#files", img);
    const attached = await page.locator("#attached").textContent();
    if (!attached.includes("attached:")) throw new Error("no attachment shown: " + attached);
    await page.press("#input", "Enter");
    await page.waitForSelector(`.msg.assistant[data-state=done] >> nth=${n}`, { timeout: 20000 });
    answers.push(await page.locator(`.msg.assistant >> nth=${n}`).textContent());
  }
  const shown = await page.locator(".msg.user img").count();
  await page.screenshot({ path: shot, fullPage: true });
  await browser.close();
  console.log(JSON.stringify({ answers, shown, foreign, errors }));
})().catch((e) => { console.error("FAIL: " + (e.stack || e)); process.exit(1); });
