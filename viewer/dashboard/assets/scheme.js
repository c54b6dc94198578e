// AG Grid's themes read data-ag-theme-mode; Mantine sets data-mantine-color-scheme (following the system)
(function () {
  const root = document.documentElement;
  const sync = () => root.setAttribute("data-ag-theme-mode", root.getAttribute("data-mantine-color-scheme") || "light");
  new MutationObserver(sync).observe(root, {attributes: true, attributeFilter: ["data-mantine-color-scheme"]});
  sync();
})();
