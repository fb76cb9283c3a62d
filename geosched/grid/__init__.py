"""Grid carbon intensity as users get it: files read into hourly series per grid zone (`formats`), the zones'
cloud regions (`zones`), the real series geosched ships (`shipped`) and forecasts of the hours to come
(`forecast`). Pure core: text and arrays in, values out; reading files is `geosched.grid.carbon`'s."""
