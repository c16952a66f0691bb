/**
 * The GraphiQL page served on a browser GET when introspection is enabled (SPEC 3.3).
 * Assets come from a CDN so the gateway ships no front-end bundle; the page posts to its own URL.
 */
export function graphiqlPage(title: string): string {
  const safe = title.replace(/[<>&"]/g, (c) => `&#${c.charCodeAt(0)};`);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${safe} · GraphiQL</title>
<link rel="stylesheet" href="https://unpkg.com/graphiql@3/graphiql.min.css">
</head>
<body style="margin:0">
<div id="graphiql" style="height:100vh"></div>
<script crossorigin src="https://unpkg.com/react@18/umd/react.production.min.js"></script>
<script crossorigin src="https://unpkg.com/react-dom@18/umd/react-dom.production.min.js"></script>
<script crossorigin src="https://unpkg.com/graphiql@3/graphiql.min.js"></script>
<script>
  const fetcher = GraphiQL.createFetcher({ url: location.pathname });
  ReactDOM.createRoot(document.getElementById('graphiql')).render(React.createElement(GraphiQL, { fetcher }));
</script>
</body>
</html>
`;
}
